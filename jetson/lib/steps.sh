# shellcheck shell=bash
# The install steps of deploy.sh, one function each. Each first checks whether its work is already
# done (so a second run changes nothing), and changes the system only through `run`/`write_file`.
# Uses deploy.sh's settings (VENV, TORCH_INDEX, ...) and output helpers (step, info, run, ...).

ensure_apt_packages() {
  step "System packages"
  local missing=() pkg
  for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  if ((${#missing[@]} == 0)); then
    done_already "${APT_PACKAGES[*]} installed"
    return
  fi
  run apt-get update
  run apt-get install -y --no-install-recommends "${missing[@]}"
}

ensure_venv() {
  step "Virtual environment $VENV"
  if [[ -x $VENV/bin/python ]]; then
    done_already "exists"
    return
  fi
  run python3 -m venv "$VENV"
  run "$VENV/bin/python" -m pip install --upgrade pip
}

# Prints "VERSION CUDA" of the venv's torch ("2.8.0 12.6"; CUDA "None" for a CPU build), or nothing.
venv_torch() {
  [[ -x $VENV/bin/python ]] || return 0
  "$VENV/bin/python" -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>/dev/null || true
}

ensure_torch() {
  step "CUDA-enabled torch ($TORCH_SPEC from $TORCH_INDEX)"
  local have wanted=${TORCH_SPEC#*==}
  have=$(venv_torch)
  if [[ -n $have && ${have#* } != None && ($wanted == "$TORCH_SPEC" || ${have%% *} == "$wanted"*) ]]; then
    done_already "torch ${have%% *} with CUDA ${have#* }"
  else
    local replace=()
    if [[ -n $have ]]; then
      info "replacing torch '$have' (not the wanted CUDA build)"
      replace=(--force-reinstall --no-deps) # else pip keeps a CPU build of the same version
    fi
    # --index-url only, no PyPI extra index: PyPI has a CPU-only aarch64 torch of the same version that
    # pip would prefer (its manylinux tag ranks above the index's linux_aarch64 wheel).
    run "$VENV/bin/python" -m pip install "${replace[@]}" --index-url "$TORCH_INDEX" "$TORCH_SPEC"
  fi
  # Pin whatever torch is now installed, so installing the project can never replace it.
  have=$(venv_torch)
  if [[ -z $have ]]; then
    ((DRY_RUN)) || die "torch did not install into $VENV"
    info "would write: $VENV/torch-constraint.txt (torch==<installed version>)"
    return
  fi
  ((DRY_RUN)) || [[ ${have#* } != None ]] || die "the torch from $TORCH_INDEX is a CPU-only build ($have)"
  local pin
  pin=$(mktemp)
  printf 'torch==%s\n' "${have%% *}" >"$pin"
  write_file "$pin" "$VENV/torch-constraint.txt" || done_already "torch pinned to ${have%% *}"
  rm -f "$pin"
}

# Hash of what the project install depends on: requirements.txt and the torch pin.
requirements_sum() {
  { cat "$PROJECT_DIR/requirements.txt"; cat "$VENV/torch-constraint.txt" 2>/dev/null || true; } |
    sha256sum | cut -d' ' -f1
}

ensure_project() {
  step "Project requirements (torch kept: requirements.txt pins torch on x86_64 only)"
  local stamp=$VENV/.requirements.sha256
  if [[ -f $stamp && $(cat "$stamp") == "$(requirements_sum)" ]]; then
    done_already "requirements unchanged since the last install"
    return
  fi
  run "$VENV/bin/python" -m pip install -r "$PROJECT_DIR/requirements.txt" -c "$VENV/torch-constraint.txt"
  ((DRY_RUN)) || requirements_sum >"$stamp"
}

check_cuda() {
  step "Check CUDA from Python, and the memory monitor's backend"
  # Read-only: runs even in a dry run when the venv exists.
  if [[ ! -x $VENV/bin/python ]]; then
    info "would run: $VENV/bin/python $SCRIPT_DIR/check_cuda.py"
    return
  fi
  (cd "$PROJECT_DIR" && "$VENV/bin/python" "$SCRIPT_DIR/check_cuda.py") ||
    die "CUDA does not work from Python; see 'Troubleshooting' in jetson/README.md"
}

# nvpmodel.conf lines look like: < POWER_MODEL ID=0 NAME=MAXN >. Prints the ID for NAME (or ID).
power_mode_id() {
  local wanted=$1 conf=$ETC_ROOT/nvpmodel.conf
  if [[ $wanted =~ ^[0-9]+$ ]]; then
    echo "$wanted"
    return
  fi
  [[ -r $conf ]] || die "--power-mode $wanted: $conf not found; give a numeric mode id" 2
  sed -n "s/^< POWER_MODEL ID=\([0-9]*\) NAME=$wanted >.*/\1/p" "$conf" | head -n 1
}

ensure_power_mode() {
  step "Power mode"
  if [[ -z $POWER_MODE ]]; then
    done_already "left as it is (--power-mode NAME to change it; see 'nvpmodel -q')"
  else
    local id current
    id=$(power_mode_id "$POWER_MODE")
    [[ -n $id ]] || die "power mode '$POWER_MODE' is not in $ETC_ROOT/nvpmodel.conf: $(
      sed -n 's/^< POWER_MODEL ID=[0-9]* NAME=\([^ ]*\) >.*/\1/p' "$ETC_ROOT/nvpmodel.conf" | tr '\n' ' ')" 2
    current=$(nvpmodel -q 2>/dev/null | tail -n 1 || true)
    if [[ $current == "$id" ]]; then
      done_already "power mode $POWER_MODE (id $id) already set"
    else
      # nvpmodel may ask to reboot for some mode changes; the answer is left to the person.
      run nvpmodel -m "$id"
    fi
  fi
  if ((JETSON_CLOCKS)); then
    info "jetson_clocks will run before each service start (ExecStartPre in the unit)"
  fi
}

ensure_service() {
  step "systemd service $SERVICE ($MODE mode)"
  if ((NO_SERVICE)); then
    done_already "skipped (--no-service)"
    return
  fi
  [[ $SERVICE_USER != root ]] || info "WARNING: the service will run as root; pass --user NAME"
  [[ $HOST == 127.0.0.1 || $HOST == localhost || $MODE != ui ]] ||
    info "WARNING: the web page (camera view, questions) will be reachable from the network on $HOST:$PORT"
  [[ $HOST == 127.0.0.1 || $HOST == localhost || $MODE != ui || -n ${SECRETS[page-auth]:-} ]] ||
    info "WARNING: no --page-auth-file: the page makes up a login at each start and prints it to the journal"
  local unit changed=0
  ensure_credentials && changed=1
  unit=$(mktemp)
  render_unit >"$unit"
  printf '    ----- %s -----\n' "$UNIT_PATH"
  sed 's/^/    | /' "$unit"
  printf '    ----- end of unit -----\n'
  write_file "$unit" "$UNIT_PATH" && changed=1
  rm -f "$unit"
  if ((changed)); then
    run systemctl daemon-reload
  else
    done_already "unit file up to date"
  fi
  if systemctl is-enabled --quiet "$SERVICE" 2>/dev/null; then
    done_already "enabled at boot"
  else
    run systemctl enable "$SERVICE"
  fi
  if ((changed)) || ! systemctl is-active --quiet "$SERVICE" 2>/dev/null; then
    run systemctl restart "$SERVICE"
  else
    done_already "running"
  fi
}

# ensure_credentials: the secrets given into $CRED_DIR (root only). Returns 0 when one changed (the service
# then restarts to load it), 1 when none did.
ensure_credentials() {
  local name file changed=1 login
  for name in "${CREDENTIAL_NAMES[@]}"; do
    has_credential "$name" || continue
    file=${SECRETS[$name]:-} login=""
    if [[ -z $file ]]; then # the login split off the --source URL
      login=$(umask 077 && mktemp)
      printf '%s\n' "$SOURCE_LOGIN" >"$login"
      file=$login
    fi
    if write_secret "$file" "$CRED_DIR/$name"; then
      changed=0
    else
      done_already "secret $name unchanged"
    fi
    [[ -z $login ]] || rm -f "$login"
  done
  return $changed
}

uninstall() {
  step "Remove the service"
  if [[ -f $UNIT_PATH ]]; then
    run systemctl disable --now "$SERVICE"
    run rm -f "$UNIT_PATH"
    run systemctl daemon-reload
  else
    done_already "no $UNIT_PATH"
  fi
  if [[ -d $CRED_DIR ]]; then
    run rm -rf "$CRED_DIR" # the secrets go with the service
  fi
  step "Remove the virtual environment"
  if [[ -d $VENV ]]; then
    run rm -rf "$VENV"
    run rmdir --ignore-fail-on-non-empty "$PREFIX"
  else
    done_already "no $VENV"
  fi
  info "kept: apt packages, the power mode, downloaded models and logs (/var/lib/edge-assistant, /var/log/edge-assistant)"
}
