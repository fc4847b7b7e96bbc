# shellcheck shell=bash
# The systemd unit of deploy.sh: the app's command line and jetson/edge-assistant.service.in filled in.
# Uses deploy.sh's settings (MODE, SOURCE, MODEL, VENV, ...).

# A string made safe as a sed replacement with | as the delimiter.
sed_escape() { printf '%s' "$1" | sed -e 's/[\\&|]/\\&/g'; }

# systemd_arg ARG: ARG as one ExecStart word (quoted when needed; % and $ escaped).
systemd_arg() {
  local arg=${1//%/%%}
  arg=${arg//\$/\$\$}
  if [[ $arg =~ [[:space:]\"\'\\] || -z $arg ]]; then
    arg=${arg//\\/\\\\}
    arg=${arg//\"/\\\"}
    printf '"%s"' "$arg"
  else
    printf '%s' "$arg"
  fi
}

app_args() {
  local args=() out="" a
  [[ $MODE == ui ]] && args+=(--ui --host "$HOST" --port "$PORT")
  if [[ $SOURCE =~ ^camera:([0-9]+)$ ]]; then
    args+=(--camera "${BASH_REMATCH[1]}")
  elif [[ $SOURCE == *://* ]]; then
    args+=(--video "$SOURCE")
  else
    args+=(--video "$(realpath -m "$SOURCE")") # the service does not run from the current directory
  fi
  args+=(--model "$MODEL" --policy "$POLICY" --budget "$BUDGET" --fps "$FPS" --dtype "$DTYPE" --device cuda)
  [[ -n $QUESTION ]] && args+=(--question "$QUESTION")
  [[ -n $EVERY ]] && args+=(--every "$EVERY")
  args+=("${APP_EXTRA[@]}")
  for a in "${args[@]}"; do out+="$(systemd_arg "$a") "; done
  printf '%s' "${out% }"
}

render_unit() {
  local pre="" args
  if ((JETSON_CLOCKS)); then
    pre="# '+': runs as root although the service does not.\nExecStartPre=+/usr/bin/jetson_clocks\n"
  fi
  args=$(app_args)
  sed -e "s|@MODE@|$MODE|g" -e "s|@BOARD@|$BOARD|g" -e "s|@USER@|$(sed_escape "$SERVICE_USER")|g" \
    -e "s|@PROJECT_DIR@|$(sed_escape "$PROJECT_DIR")|g" -e "s|@VENV@|$(sed_escape "$VENV")|g" \
    -e "s|@PRE_START@|$pre|" -e "s|@APP_ARGS@|$(sed_escape "$args")|" \
    "$SCRIPT_DIR/edge-assistant.service.in"
}
