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

# Secrets the service gets as systemd credentials (LoadCredential=NAME:$CRED_DIR/NAME), and the app flag
# that reads each from the credentials folder (%d in a unit).
CREDENTIAL_NAMES=(page-auth mqtt-password webhook-secret source-credentials)
declare -A CREDENTIAL_FLAGS=(
  [page-auth]="--auth-file %d/page-auth"
  [mqtt-password]="--mqtt-password-file %d/mqtt-password"
  [webhook-secret]="--webhook-secret-file %d/webhook-secret"
  [source-credentials]="--stream-credentials-file camera=%d/source-credentials"
)
SOURCE_STREAM=camera # the stream's name when its URL has a login (the login file names it)
SOURCE_LOGIN=""      # user:password split off a --source URL (never printed)
# A query-string parameter holding a secret (as capture/redact.py's list).
SECRET_QUERY='[?&;](password|passwd|pass|pwd|psw|loginpas|token|access_token|auth|authorization|key|api_key|apikey|secret|signature|sig)='

# has_secret TEXT: a URL login (scheme://user:pass@), a secret query parameter, or --auth in TEXT.
has_secret() {
  local lower
  lower=$(printf '%s' "$1" | tr '[:upper:]' '[:lower:]')
  [[ $1 =~ ://[^/?#[:space:]]*@ || $lower =~ $SECRET_QUERY || $1 == --auth || $1 == --auth=* ]]
}

# check_secrets: refuses secrets headed for ExecStart (exit 2), checks the secret files given, and splits a
# --source URL's login off into SOURCE_LOGIN (percent-decoded), leaving SOURCE without it.
check_secrets() {
  local a name file
  for a in "${APP_EXTRA[@]}"; do
    has_secret "$a" && die "an --app-arg holds a secret (a URL login, a password parameter or --auth): it would \
sit in the unit's ExecStart; use --page-auth-file, --mqtt-password-file, --webhook-secret-file or \
--source-credentials-file" 2
  done
  if [[ $SOURCE =~ ^([A-Za-z][A-Za-z0-9+.-]*://)([^/?#]*)@(.*)$ ]]; then
    [[ -z ${SECRETS[source-credentials]:-} ]] || die "the --source URL has a login and --source-credentials-file \
gives one too: give it once" 2
    SOURCE_LOGIN=$(printf '%b' "${BASH_REMATCH[2]//%/\\x}")
    SOURCE=${BASH_REMATCH[1]}${BASH_REMATCH[3]}
    [[ $SOURCE_LOGIN == ?*:?* ]] || die "the --source URL's login must be user:password" 2
  fi
  has_secret "$SOURCE" && die "the --source URL has a password in its query string: it would sit in the unit \
file; give the stream in a private --config TOML file instead (--app-arg --config --app-arg PATH)" 2
  if [[ -n ${SECRETS[source-credentials]:-} || -n $SOURCE_LOGIN ]] && [[ $SOURCE != *://* ]]; then
    die "--source-credentials-file goes with a --source URL (rtsp://, http://), not '$SOURCE'" 2
  fi
  [[ -z ${SECRETS[page-auth]:-} || $MODE == ui ]] || die "--page-auth-file goes with --mode ui" 2
  for name in "${!SECRETS[@]}"; do
    file=${SECRETS[$name]}
    [[ -f $file ]] || die "secret file '$file' ($name) does not exist" 2
    ((DRY_RUN)) || [[ -r $file ]] || die "secret file '$file' ($name) is not readable" 2
  done
}

# has_credential NAME: a secret file was given for NAME (or, for the source, a login split off its URL).
has_credential() {
  [[ -n ${SECRETS[$1]:-} ]] || [[ $1 == source-credentials && -n $SOURCE_LOGIN ]]
}

app_args() {
  local args=() out="" a name
  [[ $MODE == ui ]] && args+=(--ui --host "$HOST" --port "$PORT")
  if [[ $SOURCE =~ ^camera:([0-9]+)$ ]]; then
    args+=(--camera "${BASH_REMATCH[1]}")
  elif [[ $SOURCE == *://* ]] && has_credential source-credentials; then
    args+=(--stream "$SOURCE_STREAM=$SOURCE") # the login file names the stream
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
  # the credential flags last, unescaped: %d is systemd's credentials folder
  for name in "${CREDENTIAL_NAMES[@]}"; do
    if has_credential "$name"; then out+="${CREDENTIAL_FLAGS[$name]} "; fi
  done
  printf '%s' "${out% }"
}

# The unit's LoadCredential= lines, one per secret given (systemd copies each into a folder only the
# service's user can read, for as long as the service runs).
load_credentials() {
  local name
  for name in "${CREDENTIAL_NAMES[@]}"; do
    if has_credential "$name"; then printf 'LoadCredential=%s:%s/%s\n' "$name" "$CRED_DIR" "$name"; fi
  done
}

render_unit() {
  local pre="" args line
  if ((JETSON_CLOCKS)); then
    pre="# '+': runs as root although the service does not.\nExecStartPre=+/usr/bin/jetson_clocks\n"
  fi
  args=$(app_args)
  sed -e "s|@MODE@|$MODE|g" -e "s|@BOARD@|$BOARD|g" -e "s|@USER@|$(sed_escape "$SERVICE_USER")|g" \
    -e "s|@PROJECT_DIR@|$(sed_escape "$PROJECT_DIR")|g" -e "s|@VENV@|$(sed_escape "$VENV")|g" \
    -e "s|@PRE_START@|$pre|" -e "s|@APP_ARGS@|$(sed_escape "$args")|" \
    "$SCRIPT_DIR/edge-assistant.service.in" |
    while IFS= read -r line; do
      if [[ $line == @CREDENTIALS@ ]]; then load_credentials; else printf '%s\n' "$line"; fi
    done
}
