#!/usr/bin/env bash
# Build (once) and run the assistant's container on a Jetson Orin, with this board's defaults.
#   jetson/run-container.sh [--dry-run] [--source camera:0|FILE|URL] [--model ID] [--expose --auth-file F] ...
# The container restarts with Docker (--restart unless-stopped), so it also comes back after a reboot.
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PROJECT_DIR=$(cd "$SCRIPT_DIR/.." && pwd)
# shellcheck source=jetson/lib/detect.sh
source "$SCRIPT_DIR/lib/detect.sh"
# shellcheck source=jetson/lib/board_defaults.sh
source "$SCRIPT_DIR/lib/board_defaults.sh"

usage() {
  cat <<EOF
Usage: $(basename "$0") [options]
  --dry-run                 print the docker commands; run nothing
  --source SRC              camera:INDEX (default camera:0), a video file, or a URL
  --board ID                $(known_boards) (default: detected)
  --model ID --budget N --fps F --dtype D --policy NAME   override the board defaults
  --port N                  host port for the web page (default 7860)
  --expose                  publish the page on all interfaces (default: 127.0.0.1 only); needs --auth-file
                            or --open
  --auth-file FILE          the page's login: one line user:password, a file only you can read (chmod 600);
                            passed to the container in its environment, never on a command line. Without it the
                            app makes a login for the run and prints it once (docker logs NAME)
  --open                    no login at all, even with --expose (every device that reaches the port may use it)
  --allowed-host NAME       a name the page is opened by (repeatable; with --expose this machine's host name
                            and NAME.local are added); IP addresses always work
  --image TAG               image name (default edge-assistant:r36.4)
  --name NAME               container name (default edge-assistant)
  --recreate                remove an existing container of that name first
  --tegrastats PATH         host tegrastats to bind-mount (default /usr/bin/tegrastats, if present)
  --etc-root DIR --proc-root DIR   fake /etc and /proc trees (tests; with --dry-run only)
EOF
}

die() {
  printf 'run-container.sh: %s\n' "$1" >&2
  exit "${2:-1}"
}

DRY_RUN=0 EXPOSE=0 RECREATE=0 OPEN=0 AUTH_FILE="" ALLOWED_HOSTS=()
ETC_ROOT=${JETSON_ETC_ROOT:-/etc} PROC_ROOT=${JETSON_PROC_ROOT:-/proc}
SOURCE=camera:0 BOARD="" MODEL="" BUDGET="" FPS="" DTYPE="" POLICY=inf-mllm PORT=7860
IMAGE=edge-assistant:r36.4 NAME=edge-assistant TEGRASTATS=/usr/bin/tegrastats
while [[ $# -gt 0 ]]; do
  case $1 in
    --dry-run) DRY_RUN=1 ;;
    --expose) EXPOSE=1 ;;
    --open) OPEN=1 ;;
    --recreate) RECREATE=1 ;;
    -h | --help) usage; exit 0 ;;
    --source | --board | --model | --budget | --fps | --dtype | --policy | --port | --image | --name | \
      --tegrastats | --etc-root | --proc-root | --auth-file | --allowed-host)
      [[ $# -ge 2 && -n $2 ]] || die "$1 needs a value" 2
      case $1 in
        --source) SOURCE=$2 ;; --board) BOARD=$2 ;; --model) MODEL=$2 ;; --budget) BUDGET=$2 ;;
        --fps) FPS=$2 ;; --dtype) DTYPE=$2 ;; --policy) POLICY=$2 ;; --port) PORT=$2 ;;
        --image) IMAGE=$2 ;; --name) NAME=$2 ;; --tegrastats) TEGRASTATS=$2 ;;
        --etc-root) ETC_ROOT=$2 ;; --proc-root) PROC_ROOT=$2 ;;
        --auth-file) AUTH_FILE=$2 ;; --allowed-host) ALLOWED_HOSTS+=("$2") ;;
      esac
      shift
      ;;
    *) die "unknown option: $1 (see --help)" 2 ;;
  esac
  shift
done
if ((!DRY_RUN)) && [[ $ETC_ROOT != /etc || $PROC_ROOT != /proc ]]; then
  die "--etc-root/--proc-root only go with --dry-run" 2
fi
# The page beyond this machine needs a login (docs/security.md); the password never goes on a command line.
if ((OPEN)) && [[ -n $AUTH_FILE ]]; then
  die "--open serves the page without a login: drop --auth-file or --open" 2
fi
if ((EXPOSE && !OPEN)) && [[ -z $AUTH_FILE ]]; then
  die "--expose publishes the page to the network: give its login with --auth-file FILE (one line user:password, chmod 600), or --open to run it without one" 2
fi
if [[ -n $AUTH_FILE ]]; then
  [[ -f $AUTH_FILE && -r $AUTH_FILE ]] || die "--auth-file $AUTH_FILE: not a readable file" 2
  [[ $(stat -c %u "$AUTH_FILE") == "$(id -u)" ]] || die "--auth-file $AUTH_FILE: not owned by you" 2
  (($(stat -c %#a "$AUTH_FILE") & 8#044)) && die "--auth-file $AUTH_FILE: readable by others; chmod 600 $AUTH_FILE" 2
  IFS= read -r EDGE_ASSISTANT_AUTH <"$AUTH_FILE" || true
  [[ $EDGE_ASSISTANT_AUTH == ?*:?* ]] || die "--auth-file $AUTH_FILE must hold one line user:password" 2
  export EDGE_ASSISTANT_AUTH
fi

# Board and its defaults: the same detection as deploy.sh.
model_string=$(read_dt_string "$PROC_ROOT/device-tree/model")
family=$(board_family "$model_string" "$(read_dt_string "$PROC_ROOT/device-tree/compatible")")
BOARD=${BOARD:-$(board_id "$family" "$(mem_total_mib "$PROC_ROOT/meminfo")")}
[[ $BOARD != unknown ]] || die "not a Jetson Orin this script knows ('${model_string:-none}'); pass --board ID" 3
l4t=$(l4t_version "$ETC_ROOT/nv_tegra_release")
[[ $l4t == 36.4* ]] || printf 'WARNING: the image is built for L4T r36.4 (JetPack 6.1/6.2); this is r%s\n' "${l4t:-?}"
read -r -a defaults <<<"$(board_defaults "$BOARD")" || die "no defaults for board '$BOARD'" 2
MODEL=${MODEL:-${defaults[0]}} BUDGET=${BUDGET:-${defaults[1]}} FPS=${FPS:-${defaults[2]}} DTYPE=${DTYPE:-${defaults[3]}}

run() {
  if ((DRY_RUN)); then
    printf 'would run:'
    printf ' %q' "$@"
    printf '\n'
  else
    printf '+ %s\n' "$*"
    "$@"
  fi
}

docker_args=(run -d --name "$NAME" --restart unless-stopped --runtime nvidia)
app_args=(--ui --host 0.0.0.0 --port 7860)
if [[ $SOURCE =~ ^camera:([0-9]+)$ ]]; then
  docker_args+=(--device "/dev/video${BASH_REMATCH[1]}")
  app_args+=(--camera "${BASH_REMATCH[1]}")
elif [[ $SOURCE == *://* ]]; then
  app_args+=(--video "$SOURCE")
else
  source_path=$(realpath -m "$SOURCE")
  docker_args+=(-v "$(dirname "$source_path"):$(dirname "$source_path"):ro")
  app_args+=(--video "$source_path")
fi
if ((EXPOSE)); then
  docker_args+=(-p "$PORT:7860")
  ALLOWED_HOSTS+=("$(uname -n)" "$(uname -n).local")
else
  docker_args+=(-p "127.0.0.1:$PORT:7860")
fi
# -e NAME without a value: docker copies it from this script's environment (not visible in ps)
[[ -n $AUTH_FILE ]] && docker_args+=(-e EDGE_ASSISTANT_AUTH)
((OPEN)) && app_args+=(--open)
for name in "${ALLOWED_HOSTS[@]}"; do app_args+=(--allowed-host "$name"); done
docker_args+=(-v edge-assistant-hf:/root/.cache/huggingface -v edge-assistant-logs:/var/log/edge-assistant)
# Without tegrastats in the container the memory monitor reads /proc/meminfo (also unified memory).
[[ -x $TEGRASTATS ]] && docker_args+=(-v "$TEGRASTATS:/usr/bin/tegrastats:ro")
app_args+=(--model "$MODEL" --policy "$POLICY" --budget "$BUDGET" --fps "$FPS" --dtype "$DTYPE" --device cuda
  --log-jsonl /var/log/edge-assistant/events.jsonl)

printf 'board=%s model=%s budget=%s fps=%s dtype=%s\n' "$BOARD" "$MODEL" "$BUDGET" "$FPS" "$DTYPE"
if ((DRY_RUN)) || ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
  run docker build -f "$SCRIPT_DIR/Dockerfile" -t "$IMAGE" "$PROJECT_DIR"
fi
if ((!DRY_RUN)) && docker container inspect "$NAME" >/dev/null 2>&1; then
  if ((!RECREATE)); then
    printf 'container %s exists (docker logs -f %s); --recreate replaces it\n' "$NAME" "$NAME"
    exit 0
  fi
  run docker rm -f "$NAME"
fi
run docker "${docker_args[@]}" "$IMAGE" "${app_args[@]}"
if ((EXPOSE)); then
  printf 'page: http://<this-jetson>:%s\n' "$PORT"
else
  printf 'page: http://127.0.0.1:%s\n' "$PORT"
fi
if ((OPEN)); then
  printf 'WARNING: --open: the page has no login\n'
elif [[ -z $AUTH_FILE ]]; then
  printf 'login: made for this run, printed once by the app: docker logs %s 2>&1 | grep login:\n' "$NAME"
fi
