"""`python -m app`: watch a video file, a network stream or a camera and answer questions about it."""

from __future__ import annotations

import argparse
import dataclasses
import logging
from pathlib import Path

from app.api.settings import ApiConfig
from app.config_flags import add_config_flags
from app.config_types import check_value
from app.fleet.config import FleetConfig
from app.input_limits import MAX_PENDING, MAX_QUESTION_CHARS, InputLimits
from app.scheduler import StandingQuestion
from cache.config import CacheConfig
from cache.policies import settings_classes
from capture.config import CaptureConfig
from model.change import ChangeConfig
from outputs.registry import output_kinds

# On in the app: in a stream, only recall lets an answer reach what the cache evicted (README, "Memory beyond
# the budget"). The library's CacheConfig keeps recall=0, a cache with no host store.
DEFAULT_RECALL = 256

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (JetPack 6)
    import tomli as tomllib


def default_of(config_class: type, name: str) -> object:
    """The default a config dataclass gives `name`: a flag's default is written once, in its dataclass."""
    return next(f.default for f in dataclasses.fields(config_class) if f.name == name)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m app",
        description="Edge streaming video assistant: a video LLM watches a stream with a bounded KV cache "
        "and answers questions about it, asked by you (type them, one per line) or every --every seconds. "
        "Type 'watch for: QUESTION [every 5s] [on change] [once] [for 10m] [threshold 0.7] [as NAME]' for a yes/no "
        "watch with alerts ('NAME: watch for: ...' on one stream), 'watches' to list them, 'unwatch NAME' to end one.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    src = p.add_argument_group("sources (one or more streams, one model)")
    src.add_argument("--video", metavar="PATH|URL", help="video file, or http(s)/rtsp stream URL")
    src.add_argument(
        "--camera",
        metavar="INDEX",
        help="camera index (V4L2), or gst:PIPELINE for a CSI camera (one camera source, converters and caps, "
        "appsink last: no tee, no other sink)",
    )
    src.add_argument(
        "--stream",
        action="append",
        metavar="NAME=SOURCE",
        help="a named stream (repeatable; SOURCE as for --video/--camera); in --config: [streams.NAME] tables "
        "with source, and optionally their own question and every. Names: lowercase letters, digits, _ and -. "
        "While running, type +NAME=SOURCE to add one and -NAME to remove one",
    )
    src.add_argument(
        "--stream-credentials-file",
        action="append",
        metavar="NAME=PATH",
        help="the login of stream NAME's URL: a file with one line user:password, readable by you only (repeatable;"
        " or EDGE_ASSISTANT_SOURCE_CREDENTIALS_NAME=user:password in the environment; in --config: "
        "credentials_file in [streams.NAME]). Keeps the password out of argv, logs and the page",
    )
    add_config_flags(src, CaptureConfig)  # --fps, --clip-seconds
    src.add_argument(
        "--realtime",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="play files at their real speed (--no-realtime: as fast as the model goes)",
    )
    src.add_argument("--loop", action="store_true", help="restart a video file at its end")
    src.add_argument(
        "--max-streams",
        type=int,
        default=8,
        help="most streams at once, configured and added while running together (more: refused, exit 2 at start)",
    )
    src.add_argument(
        "--allow-source-net",
        dest="allow_source_nets",
        action="append",
        metavar="CIDR",
        help="sources chosen while running (page, terminal +NAME=SOURCE: rtsp/http(s) URLs, uploads, cameras "
        "configured at start) may reach loopback/private/link-local addresses only inside these networks "
        "(repeatable; e.g. 192.168.1.0/24 for LAN cameras; in --config: allow_source_nets = [...])",
    )

    mdl = p.add_argument_group("model")
    mdl.add_argument(
        "--model",
        default="Qwen/Qwen2-VL-2B-Instruct",
        help="Hugging Face id, local directory, or 'tiny' (random weights, gibberish answers, offline)",
    )
    mdl.add_argument("--device", default="auto", help="auto (CUDA when present), cuda, cuda:N or cpu")
    mdl.add_argument("--dtype", default="auto", help="auto (bf16/fp16 on GPU, fp32 on CPU), bfloat16, float16, float32")
    mdl.add_argument("--trust-remote-code", action="store_true", help="allow code shipped with the model")
    # SessionConfig's defaults (model.session imports transformers: too heavy for --help; a test keeps them equal)
    mdl.add_argument(
        "--max-new-tokens",
        type=int,
        default=64,
        help="answer length cap (also the cache headroom)",
    )
    mdl.add_argument("--chunk-size", type=int, default=512, help="tokens per prefill step (bounds peak memory)")
    mdl.add_argument(
        "--compile",
        action="store_true",
        help="compile the decode step with torch.compile (CUDA graphs on a GPU) for faster answers under an "
        "evicting policy; the first answer waits for the compilation (tens of seconds), and decoding goes on "
        "eagerly where compiling fails",
    )

    kv = p.add_argument_group("bounded KV cache")
    add_config_flags(kv, CacheConfig)  # --policy, --budget, --window, --positions, --block, --store-dir, --store-quant
    for settings_class in settings_classes():  # each policy's own: --bias, --pool, --pool-mode (inf-mllm), --sinks
        add_config_flags(kv, settings_class)
    kv.add_argument(
        "--recall",
        type=int,
        default=DEFAULT_RECALL,
        help="second tier: keep every token in a host store and bring back up to this many tokens per "
        "question (0 = off: the device cache alone); device KV stays within budget + recall",
    )
    kv.add_argument(
        "--store-mb",
        type=float,
        default=default_of(CacheConfig, "store_bytes") / 2**20,
        help="host store bound in MiB (0 = a quarter of the available RAM, at most 4096); oldest blocks go first",
    )

    chg = p.add_argument_group("what a clip brings (only what changed)")
    add_config_flags(chg, ChangeConfig)  # --drop-unchanged, --change-threshold, --keyframe-every, --change-floor

    ask = p.add_argument_group("questions and run")
    add_config_flags(ask, StandingQuestion)  # --question, --every
    ask.add_argument("--max-rounds", type=int, default=0, help="stop after N answers (0 = no limit)")
    ask.add_argument("--duration", type=float, default=0.0, help="stop after N seconds of stream time (0 = no limit)")
    ask.add_argument(
        "--alert",
        action="append",
        metavar='NAME="QUESTION"',
        help="a yes/no watch checked on every stream every 10 s of stream time (repeatable); alert events begin "
        "after 2 yes and end after 2 no (p_yes >= 0.5), with a 30 s cooldown. In --config: [alerts.NAME] tables "
        "with question, streams, every, threshold, on_after, off_after, cooldown, on_change",
    )
    ask.add_argument(
        "--alert-on-change",
        action="store_true",
        help="check the --alert watches only when their stream changed since the last check (a static camera "
        "costs no checks until something moves; see --drop-unchanged)",
    )
    limits = InputLimits()
    ask.add_argument(
        "--max-question-chars",
        type=int,
        default=limits.max_question_chars,
        help=f"a longer question (typed or from the page) is refused before it is queued (1..{MAX_QUESTION_CHARS})",
    )
    ask.add_argument(
        "--max-pending-questions",
        type=int,
        default=limits.max_pending,
        help="questions waiting for the model; one more is refused as busy (try again). While clips wait, at most "
        f"{limits.per_clip} questions are answered per clip, so questions never starve the video (1..{MAX_PENDING})",
    )
    ask.add_argument("--log-jsonl", type=Path, help="append every event to this JSON-lines file")
    ask.add_argument("--quiet", action="store_true", help="do not print a line per clip")
    ask.add_argument("--config", type=Path, help="TOML file setting any of these options (flags win)")
    ask.add_argument("-v", "--verbose", action="store_true", help="debug logging")

    tl = p.add_argument_group("timeline: every answer and alert on disk, searchable (python -m app history)")
    tl.add_argument(
        "--timeline",
        metavar="PATH|URL",
        default=None,
        help="SQLite file of the timeline (default: timeline.sqlite in $EDGE_ASSISTANT_DATA or "
        '~/.cache/edge-stream-assistant; "" turns it off), or one PostgreSQL database for several boxes: '
        "postgresql://[user@]host[:port]/dbname (password: $EDGE_ASSISTANT_TIMELINE_PASSWORD, $PGPASSWORD or "
        "--timeline-password-file, never in the URL)",
    )
    tl.add_argument(
        "--timeline-password-file",
        type=Path,
        metavar="FILE",
        help="the PostgreSQL password in this file's first line (mode 600: refused when others may read it)",
    )
    tl.add_argument("--timeline-days", type=float, default=7.0, help="keep this many days")
    tl.add_argument("--timeline-mb", type=float, default=256.0, help="keep the file under this many MiB")
    tl.add_argument(
        "--timeline-notes",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="put the best matching earlier moments into a person's question as short timestamped notes",
    )

    out = p.add_argument_group("alerts and answers out of the box (secrets: environment or files, never flags)")
    for kind in output_kinds():  # every registered output's flags: --mqtt, --webhook, --ntfy, ... (outputs/)
        add_config_flags(out, kind.settings_class)

    fleet = p.add_argument_group("fleet: streams placed across machines with Ray (docs/fleet.md)")
    fleet.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run the streams on the hosts of a Ray cluster: auto (the cluster this machine joined with ray start) "
        "or HOST:PORT of its head; each box offers hosts by the resource edge_host. Without it Ray is not used",
    )
    add_config_flags(fleet, FleetConfig)  # --ray-host-start-s, --ray-failover-s

    web = p.add_argument_group(
        "web page (docs/security.md: on loopback no login by default; beyond it a login, generated if none is given)"
    )
    web.add_argument("--ui", action="store_true", help="serve the Gradio page instead of the terminal mode")
    web.add_argument(
        "--host",
        default="127.0.0.1",
        help="address the page listens on; anything but loopback (e.g. 0.0.0.0: every interface) needs a login",
    )
    web.add_argument("--port", type=int, default=7860, help="port of the page")
    web.add_argument(
        "--share", action="store_true", help="also publish a temporary public Gradio link (needs a login, as --host)"
    )
    web.add_argument(
        "--auth-file",
        type=Path,
        metavar="FILE",
        help="the page's login: one line user:password in a file only you can read (chmod 600); or set "
        "EDGE_ASSISTANT_AUTH=user:password. The password: at least 12 characters, not a common one. Without "
        "either, a page beyond loopback gets a login made for the run, printed once at start",
    )
    web.add_argument("--auth", help=argparse.SUPPRESS)  # refused: argv is visible to every local user (ps)
    web.add_argument(
        "--open",
        action="store_true",
        help="serve a page beyond loopback or behind a proxy (--allowed-host, --trusted-proxy) WITHOUT any login "
        "(every device that reaches it may use it)",
    )
    web.add_argument(
        "--allowed-host",
        action="append",
        metavar="NAME",
        help="a name the page may be opened by (Host header; repeatable), e.g. the machine's DNS name or a reverse "
        "proxy's; loopback names, IP addresses and --host are always accepted, other names refused (DNS rebinding). "
        "It means others reach the page: a login is then required even on loopback (or --open)",
    )
    web.add_argument(
        "--trusted-proxy",
        action="append",
        metavar="ADDR",
        help="the IP address (or network) of a reverse proxy in front of the page (repeatable): only its "
        "X-Forwarded-For names the client (the failed-login throttle counts per client). Without it the "
        "header is ignored and every client is its own peer address",
    )
    web.add_argument("--max-upload-mb", type=int, default=500, help="largest video upload accepted (MiB)")
    web.add_argument("--max-uploads", type=int, default=20, help="video files the page accepts per run (then: restart)")
    web.add_argument(
        "--max-upload-total-mb", type=int, default=2000, help="MiB the page's uploads may take together per run"
    )

    api = p.add_argument_group(
        "HTTP API (docs/api.md): /api/v1/... and OpenAI-compatible /v1/chat/completions, on the page's server with "
        "--ui, alone with --api; on loopback without a token where the page needs no login, else bearer tokens"
    )
    api.add_argument(
        "--api",
        action="store_true",
        help="serve the HTTP API alone (no page, headless) on --host/--port; sources optional (add them via the API)",
    )
    api.add_argument(
        "--api-tokens-file",
        type=Path,
        metavar="FILE",
        help="API tokens, one a line: TOKEN SCOPE[,SCOPE...] [NAME] (scopes: read, ask, manage), in a file only you "
        "can read (chmod 600); or set EDGE_ASSISTANT_API_TOKENS. Never on the command line",
    )
    add_config_flags(api, ApiConfig)  # --api-watches-per-token, --api-questions-per-token, --api-sse-queue, ...
    p.set_defaults(stream_tables=None, alert_tables=None)  # the --config file's [streams.NAME] and [alerts.NAME]
    return p


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """Parses flags on top of the --config file's values. Bad input exits with code 2 and a message."""
    parser = build_parser()
    pre, _ = parser.parse_known_args(argv)
    if pre.config is not None:
        parser.set_defaults(**_read_config_file(parser, pre.config))
    return parser.parse_args(argv)


def _read_config_file(parser: argparse.ArgumentParser, path: Path) -> dict:
    try:
        values = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as err:
        parser.error(f"cannot read --config {path}: {err}")
    known = {a.dest: a for a in parser._actions}
    settings = {}
    for key, value in values.items():
        if key in ("streams", "alerts"):
            settings[f"{key[:-1]}_tables"] = value
            continue
        dest = key.replace("-", "_")
        if dest not in known or dest in ("help", "config"):
            parser.error(f"--config {path}: unknown setting {key!r}")
        try:
            settings[dest] = check_value(known[dest], key, value)
        except ValueError as err:
            parser.error(f"--config {path}: {err}")
    return settings


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from app.config import AppConfig  # heavy imports (torch, transformers) after --help
    from bus.redact import RedactingFormatter, redact_source

    try:
        config = AppConfig.from_args(args)
    except ValueError as err:
        build_parser().error(redact_source(str(err)))
    handler = logging.StreamHandler()  # stderr; a traceback from FFmpeg may quote a URL: redacted
    handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S"))
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, handlers=[handler])
    for noisy in ("httpx", "httpcore", "urllib3", "gradio"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if config.fleet is not None and config.ui is not None:
        from app.fleet.web import serve_fleet

        return serve_fleet(config)
    if config.fleet is not None:
        from app.fleet.terminal import run_fleet

        return run_fleet(config)
    if config.api.headless:
        from app.api.serve import serve_api

        return serve_api(config)
    if config.ui is not None:
        from app.web import serve

        return serve(config)
    from app.terminal import run_terminal

    return run_terminal(config)
