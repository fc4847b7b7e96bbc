#!/usr/bin/env bash
# Installs what tests/ui/test_ui_browser.py needs: Debian's chromium (apt) and playwright-core (npm, pinned in
# tests/ui_browser/package-lock.json; it drives the system chromium, no browser download).
# Idempotent; non-interactive; fails loudly. Run as root (CI) or with sudo available.
set -euo pipefail
cd "$(dirname "$0")/.."

CHROMIUM="${CHROMIUM_PATH:-/usr/bin/chromium}"
export DEBIAN_FRONTEND=noninteractive

fail() {
  echo "ui_setup: $*" >&2
  exit 1
}

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo -n "$@" || fail "needs root to run: $* (sudo -n refused)"
  else
    fail "needs root to run: $*"
  fi
}

apt_install() {
  command -v apt-get >/dev/null 2>&1 || fail "apt-get not found: install $* by hand"
  as_root apt-get update -qq || fail "apt-get update failed"
  as_root apt-get install -y -qq --no-install-recommends "$@" </dev/null || fail "apt-get install $* failed"
}

if [ ! -x "$CHROMIUM" ]; then
  echo "ui_setup: installing chromium" >&2
  apt_install chromium
  [ -x "$CHROMIUM" ] || fail "chromium installed but $CHROMIUM is missing (set CHROMIUM_PATH)"
fi
"$CHROMIUM" --version >/dev/null 2>&1 || fail "$CHROMIUM does not run"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "ui_setup: installing nodejs and npm" >&2
  apt_install nodejs npm
fi

if [ ! -d tests/ui_browser/node_modules/playwright-core ]; then
  echo "ui_setup: installing playwright-core" >&2
  (cd tests/ui_browser && npm ci --no-audit --no-fund --ignore-scripts </dev/null) || fail "npm ci failed"
fi
(cd tests/ui_browser && node -e "require('playwright-core')") || fail "playwright-core does not load"

echo "ui_setup: $("$CHROMIUM" --version 2>/dev/null), node $(node --version), playwright-core ready" >&2
