#!/usr/bin/env bash
# Take a Jetson Orin (JetPack 6.1/6.2, L4T r36.4) to a running assistant, as a systemd service.
#   sudo jetson/deploy.sh [options]      install (a second run changes nothing)
#   jetson/deploy.sh --dry-run           print every step, change nothing (no root needed)
#   sudo jetson/deploy.sh --uninstall    remove the service and the virtual environment
# See jetson/README.md for what each step does and why; --help for the options.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PROJECT_DIR=$(cd "$SCRIPT_DIR/.." && pwd)
# shellcheck source=jetson/lib/detect.sh
source "$SCRIPT_DIR/lib/detect.sh"
# shellcheck source=jetson/lib/board_defaults.sh
source "$SCRIPT_DIR/lib/board_defaults.sh"
# shellcheck source=jetson/lib/unit.sh
source "$SCRIPT_DIR/lib/unit.sh"
# shellcheck source=jetson/lib/steps.sh
source "$SCRIPT_DIR/lib/steps.sh"

SERVICE=edge-assistant
APT_PACKAGES=(python3-venv python3-dev python3-pip libopenblas-dev v4l-utils nvidia-jetpack)
# Tools that change the system; a sandbox run (tests) must provide all of them itself.
MUTATING_TOOLS=(apt-get dpkg-query systemctl nvpmodel python3)

usage() {
  cat <<EOF
Usage: $(basename "$0") [options]

Modes:
  --dry-run              print every step and the unit file; change nothing
  --uninstall            stop and remove the service and the virtual environment
  --force                continue on an unsupported L4T release or a non-Jetson machine (needs --board)

Assistant (defaults depend on the board, see jetson/README.md):
  --board ID             one of: $(known_boards) (default: detected)
  --model ID             Hugging Face id or local directory
  --budget TOKENS        KV-cache budget
  --fps FPS              frames sampled per second
  --dtype DTYPE          auto|bfloat16|float16|float32
  --policy NAME          inf-mllm|streaming-llm|h2o|window|full (default: inf-mllm)
  --mode MODE            ui (web page, default) or terminal (answers go to the journal)
  --source SRC           camera:INDEX, a file or a URL (default: camera:0)
  --host HOST --port N   where the web page listens (default: 127.0.0.1 7860)
  --question TEXT        standing question;  --every SECONDS  how often to ask it
  --app-arg ARG          extra argument for 'python -m app' (repeatable; never a secret: refused)
  --user NAME            user the service runs as (default: \$SUDO_USER)

Secrets (each FILE is copied to a root-only credentials folder and handed to the service by systemd's
LoadCredential=, never written into the unit's ExecStart):
  --page-auth-file FILE           the page's login, one line user:password (--mode ui)
  --mqtt-password-file FILE       the MQTT broker's password (with --app-arg --mqtt --app-arg URL)
  --webhook-secret-file FILE      the key signing webhook bodies (with --app-arg --webhook --app-arg URL)
  --source-credentials-file FILE  the login of the --source URL, one line user:password
                                  (a --source rtsp://user:pass@host/... is split the same way)

Jetson:
  --power-mode NAME|ID   set an nvpmodel mode (e.g. MAXN); names come from /etc/nvpmodel.conf
  --jetson-clocks        run jetson_clocks before each service start
  --no-service           stop after the Python environment and the CUDA check
  --torch-index URL      pip index for the CUDA torch wheel (default: per L4T release)
  --torch-spec SPEC      torch requirement (default: per L4T release)
  --prefix DIR           where the virtual environment goes (default: /opt/edge-assistant)

Testing:
  --etc-root DIR --proc-root DIR   read nv_tegra_release, nvpmodel.conf, device-tree and meminfo
                                   from fake trees (only with --dry-run); env JETSON_ETC_ROOT/_PROC_ROOT
  --systemd-dir DIR      where the unit file goes (default: /etc/systemd/system)
  --credentials-dir DIR  where the secrets go (default: /etc/edge-assistant/credentials)
EOF
}

# --- options ----------------------------------------------------------------------------------
DRY_RUN=0 UNINSTALL=0 FORCE=0 NO_SERVICE=0 JETSON_CLOCKS=0
ETC_ROOT=${JETSON_ETC_ROOT:-/etc}
PROC_ROOT=${JETSON_PROC_ROOT:-/proc}
PREFIX=/opt/edge-assistant
SYSTEMD_DIR=/etc/systemd/system
CRED_DIR="" # default: /etc/edge-assistant/credentials (in a sandbox run: under the sandbox)
declare -A SECRETS=() # credential name -> the file given for it
BOARD="" MODEL="" BUDGET="" FPS="" DTYPE="" POLICY=inf-mllm MODE=ui SOURCE=camera:0
HOST=127.0.0.1 PORT=7860 QUESTION="" EVERY="" POWER_MODE="" TORCH_INDEX="" TORCH_SPEC=""
SERVICE_USER=${SUDO_USER:-$(id -un)}
APP_EXTRA=()

die() { # die MESSAGE [EXIT_CODE]: 2 = bad usage, 3 = refused (machine or release), 1 = a step failed
  printf 'deploy.sh: %s\n' "$1" >&2
  exit "${2:-1}"
}

need_value() { [[ $# -ge 2 && -n $2 ]] || die "$1 needs a value" 2; }

while [[ $# -gt 0 ]]; do
  case $1 in
    --dry-run) DRY_RUN=1 ;;
    --uninstall) UNINSTALL=1 ;;
    --force) FORCE=1 ;;
    --no-service) NO_SERVICE=1 ;;
    --jetson-clocks) JETSON_CLOCKS=1 ;;
    -h | --help) usage; exit 0 ;;
    --board | --model | --budget | --fps | --dtype | --policy | --mode | --source | --host | --port | \
      --question | --every | --app-arg | --user | --power-mode | --torch-index | --torch-spec | \
      --prefix | --etc-root | --proc-root | --systemd-dir | --credentials-dir | --page-auth-file | \
      --mqtt-password-file | --webhook-secret-file | --source-credentials-file)
      need_value "$@"
      case $1 in
        --board) BOARD=$2 ;; --model) MODEL=$2 ;; --budget) BUDGET=$2 ;; --fps) FPS=$2 ;;
        --dtype) DTYPE=$2 ;; --policy) POLICY=$2 ;; --mode) MODE=$2 ;; --source) SOURCE=$2 ;;
        --host) HOST=$2 ;; --port) PORT=$2 ;; --question) QUESTION=$2 ;; --every) EVERY=$2 ;;
        --app-arg) APP_EXTRA+=("$2") ;; --user) SERVICE_USER=$2 ;; --power-mode) POWER_MODE=$2 ;;
        --torch-index) TORCH_INDEX=$2 ;; --torch-spec) TORCH_SPEC=$2 ;; --prefix) PREFIX=$2 ;;
        --etc-root) ETC_ROOT=$2 ;; --proc-root) PROC_ROOT=$2 ;; --systemd-dir) SYSTEMD_DIR=$2 ;;
        --credentials-dir) CRED_DIR=$2 ;; --page-auth-file) SECRETS[page-auth]=$2 ;;
        --mqtt-password-file) SECRETS[mqtt-password]=$2 ;; --webhook-secret-file) SECRETS[webhook-secret]=$2 ;;
        --source-credentials-file) SECRETS[source-credentials]=$2 ;;
      esac
      shift
      ;;
    *) die "unknown option: $1 (see --help)" 2 ;;
  esac
  shift
done

[[ $MODE == ui || $MODE == terminal ]] || die "--mode must be ui or terminal, not '$MODE'" 2
[[ -z $BUDGET || $BUDGET =~ ^[1-9][0-9]*$ ]] || die "--budget must be a positive number of tokens" 2
[[ -z $FPS || $FPS =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)$ ]] || die "--fps must be a positive number" 2
[[ -z $DTYPE || $DTYPE =~ ^(auto|bfloat16|float16|float32)$ ]] || die "--dtype: auto|bfloat16|float16|float32" 2
[[ $POLICY =~ ^(inf-mllm|streaming-llm|h2o|window|full)$ ]] || die "--policy: inf-mllm|streaming-llm|h2o|window|full" 2
[[ $PORT =~ ^[0-9]+$ ]] || die "--port must be a number" 2
[[ -z $BOARD || " $(known_boards) " == *" $BOARD "* ]] || die "--board must be one of: $(known_boards)" 2
VENV=$PREFIX/venv
UNIT_PATH=$SYSTEMD_DIR/$SERVICE.service
check_secrets # lib/unit.sh: no secret in ExecStart; a --source login split off into a credential

# Fake /etc or /proc trees are for planning only: never change a real system on fake facts.
# A sandbox run (JETSON_DEPLOY_SANDBOX=DIR, used by the tests) is the one exception: every tool
# that changes something must then come from DIR, so nothing outside it can be touched.
SANDBOX=${JETSON_DEPLOY_SANDBOX:-}
CRED_DIR=${CRED_DIR:-${SANDBOX:+$SANDBOX/etc/edge-assistant/credentials}}
CRED_DIR=${CRED_DIR:-/etc/edge-assistant/credentials}
if [[ -n $SANDBOX ]]; then
  for tool in "${MUTATING_TOOLS[@]}"; do
    [[ $(command -v "$tool" || true) == "$SANDBOX"/* ]] || die "sandbox run: $tool must come from $SANDBOX" 2
  done
  [[ $PREFIX == "$SANDBOX"/* && $SYSTEMD_DIR == "$SANDBOX"/* && $CRED_DIR == "$SANDBOX"/* ]] ||
    die "sandbox run: --prefix, --systemd-dir and --credentials-dir must be inside $SANDBOX" 2
elif ((!DRY_RUN)); then
  [[ $ETC_ROOT == /etc && $PROC_ROOT == /proc ]] || die "--etc-root/--proc-root only go with --dry-run" 2
  ((EUID == 0)) || die "run as root (sudo $0 ...), or add --dry-run to see the plan" 2
  ((UNINSTALL)) || id -u "$SERVICE_USER" >/dev/null 2>&1 || die "no user '$SERVICE_USER' (--user NAME)" 2
fi

# --- output helpers -----------------------------------------------------------------------------
STEP=0
step() { STEP=$((STEP + 1)); printf '\n==> [%d] %s\n' "$STEP" "$*"; }
info() { printf '    %s\n' "$*"; }
done_already() { printf '    ok: %s (nothing to do)\n' "$*"; }

# run CMD...: the one place commands that change the system go through.
run() {
  if ((DRY_RUN)); then
    printf '    would run:'
    printf ' %q' "$@" # copy-pasteable
    printf '\n'
  else
    printf '    + %s\n' "$*"
    "$@"
  fi
}

# write_file SRC DEST: install SRC as DEST (mode 644) unless DEST already has that content.
# Returns 0 when DEST changed (or would change), 1 when it was already up to date.
write_file() {
  local src=$1 dest=$2
  if [[ -f $dest ]] && cmp -s "$src" "$dest"; then
    return 1
  fi
  if ((DRY_RUN)); then
    printf '    would write: %s\n' "$dest"
  else
    run install -D -m 644 "$src" "$dest"
  fi
  return 0
}

# write_secret SRC DEST: install SRC as DEST, mode 600, root's (in a root-only folder), unless DEST already
# has that content. Never prints the content. Returns 0 when DEST changed (or would change), 1 when not.
write_secret() {
  local src=$1 dest=$2 owner=()
  ((EUID == 0)) && owner=(-o root -g root)
  if [[ -f $dest ]] && cmp -s "$src" "$dest"; then
    return 1
  fi
  if ((DRY_RUN)); then
    printf '    would write: %s (mode 600, root only)\n' "$dest"
  else
    [[ -d ${dest%/*} ]] || run install -d -m 700 "${owner[@]}" "${dest%/*}"
    run install -m 600 "${owner[@]}" "$src" "$dest"
  fi
  return 0
}

# --- detection ----------------------------------------------------------------------------------
detect() {
  local model compatible family mem_mib default_index default_spec
  model=$(read_dt_string "$PROC_ROOT/device-tree/model")
  compatible=$(read_dt_string "$PROC_ROOT/device-tree/compatible")
  L4T=$(l4t_version "$ETC_ROOT/nv_tegra_release")
  mem_mib=$(mem_total_mib "$PROC_ROOT/meminfo")
  family=$(board_family "$model" "$compatible")
  DETECTED_BOARD=$(board_id "$family" "$mem_mib")
  info "device-tree model: ${model:-none}"
  info "memory: ${mem_mib} MiB"

  local is_jetson=0
  [[ -n $L4T || $compatible == *nvidia,tegra* || $model == *Jetson* ]] && is_jetson=1
  if ((!is_jetson)); then
    if ((!FORCE)) || [[ -z $BOARD ]]; then
      die "this is not an NVIDIA Jetson (no $ETC_ROOT/nv_tegra_release, device-tree model \
'${model:-none}'). On a desktop or server: pip install -r requirements.txt. To plan for a Jetson anyway: \
--force --board ID." 3
    fi
    info "WARNING: not a Jetson; continuing because of --force --board $BOARD"
  fi
  if [[ $DETECTED_BOARD == unknown && -z $BOARD ]]; then
    die "unrecognised Jetson board '${model:-?}' (compatible: ${compatible:-?}); pass --board ID ($(known_boards))" 3
  fi
  BOARD=${BOARD:-$DETECTED_BOARD}

  IFS='|' read -r SUPPORTED JETPACK default_index default_spec REASON <<<"$(l4t_support "$L4T")"
  if [[ $SUPPORTED != yes ]]; then
    ((FORCE)) || die "unsupported: $REASON. To try anyway: --force (and --torch-index URL --torch-spec SPEC)." 3
    info "WARNING: $REASON; continuing because of --force"
  fi
  TORCH_INDEX=${TORCH_INDEX:-$default_index}
  TORCH_SPEC=${TORCH_SPEC:-$default_spec}
  if [[ -z $TORCH_INDEX || -z $TORCH_SPEC ]]; then
    die "no known CUDA torch source for L4T '${L4T:-none}': pass --torch-index URL --torch-spec SPEC" 3
  fi

  local defaults
  read -r -a defaults <<<"$(board_defaults "$BOARD")"
  MODEL=${MODEL:-${defaults[0]}} BUDGET=${BUDGET:-${defaults[1]}}
  FPS=${FPS:-${defaults[2]}} DTYPE=${DTYPE:-${defaults[3]}}

  # One key=value per line: people read it, tests parse it.
  info "board=$BOARD"
  info "l4t=${L4T:-none}"
  info "jetpack=$JETPACK"
  info "torch_index=$TORCH_INDEX"
  info "torch_spec=$TORCH_SPEC"
  info "model=$MODEL"
  info "budget=$BUDGET"
  info "fps=$FPS"
  info "dtype=$DTYPE"
}

main() {
  ((DRY_RUN)) && printf 'DRY RUN: nothing will be changed.\n'
  if ((UNINSTALL)); then
    uninstall
    return
  fi
  step "Detect the board and the L4T release"
  detect
  ensure_apt_packages
  ensure_venv
  ensure_torch
  ensure_project
  check_cuda
  ensure_power_mode
  ensure_service
  printf '\nDone.'
  if ((!NO_SERVICE)); then
    [[ $MODE == ui ]] && printf ' Web page: http://%s:%s' "$HOST" "$PORT"
    printf ' Logs: journalctl -u %s -f' "$SERVICE"
  fi
  printf '\n'
}

main
