"""The flags with no home in a component's config: small dataclasses grouped by concern, whose fields are the
flags and --config keys (app/config_flags.py), and the table of every flag group in --help order.

`AppConfig.from_args` reads them into the components (app/config.py): a stream from --video, --camera or
--stream, the page from --ui, the timeline from --timeline. Their defaults are written here once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from api.config import ApiConfig
from app.fleet_config import FleetConfig
from app.run_limits import RunLimits
from bus.input_limits import InputLimits
from cache.config import CacheConfig
from cache.policies import settings_classes
from capture.config import CaptureConfig
from model.change import ChangeConfig
from model.config import ModelConfig
from model.session_config import SessionConfig
from timeline.config import TimelineConfig
from ui.config import UIConfig
from watches.scheduler import StandingQuestion


@dataclass(frozen=True)
class SourceFlags:
    """What to watch (one or more streams) and what may be watched when chosen while running."""

    video: str | None = field(
        default=None, metadata={"metavar": "PATH|URL", "help": "video file, or http(s)/rtsp stream URL"}
    )
    camera: str | None = field(
        default=None,
        metadata={
            "metavar": "INDEX",
            "help": "camera index (V4L2), or gst:PIPELINE for a CSI camera (one camera source, converters and caps, "
            "appsink last: no tee, no other sink)",
        },
    )
    stream: tuple[str, ...] = field(
        default=(),
        metadata={
            "repeat": True,
            "metavar": "NAME=SOURCE",
            "help": "a named stream (repeatable; SOURCE as for --video/--camera); in --config: [streams.NAME] tables "
            "with source, and optionally their own question and every. Names: lowercase letters, digits, _ and -. "
            "While running, type +NAME=SOURCE to add one and -NAME to remove one",
        },
    )
    stream_credentials_file: tuple[str, ...] = field(
        default=(),
        metadata={
            "repeat": True,
            "metavar": "NAME=PATH",
            "help": "the login of stream NAME's URL: a file with one line user:password, readable by you only "
            "(repeatable; or EDGE_ASSISTANT_SOURCE_CREDENTIALS_NAME=user:password in the environment; in --config: "
            "credentials_file in [streams.NAME]). Keeps the password out of argv, logs and the page",
        },
    )
    # on in the app (live mode); the library's CaptureConfig.realtime is off (benchmarks, tests)
    realtime: bool = field(
        default=True, metadata={"help": "play files at their real speed (--no-realtime: as fast as the model goes)"}
    )
    max_streams: int = field(
        default=8,
        metadata={
            "help": "most streams at once, configured and added while running together (more: refused, exit 2 at start)"
        },
    )
    allow_source_nets: tuple[str, ...] = field(
        default=(),
        metadata={
            "flag": "--allow-source-net",
            "dest": "allow_source_nets",
            "repeat": True,
            "metavar": "CIDR",
            "help": "sources chosen while running (page, terminal +NAME=SOURCE: rtsp/http(s) URLs, uploads, cameras "
            "configured at start) may reach loopback/private/link-local addresses only inside these networks "
            "(repeatable; e.g. 192.168.1.0/24 for LAN cameras; in --config: allow_source_nets = [...])",
        },
    )


@dataclass(frozen=True)
class RecallFlags:
    """The second tier as the app runs it: on, where the library's CacheConfig keeps recall=0 (a cache with no
    host store). In a stream, only recall lets an answer reach what the cache evicted (README, "Memory beyond
    the budget")."""

    recall: int = field(
        default=256,
        metadata={
            "help": "second tier: keep every token in a host store and bring back up to this many tokens per "
            "question (0 = off: the device cache alone); device KV stays within budget + recall"
        },
    )


@dataclass(frozen=True)
class WatchFlags:
    """Yes/no watches given on the command line (watches/spec.py reads each --alert)."""

    alert: tuple[str, ...] = field(
        default=(),
        metadata={
            "repeat": True,
            "metavar": 'NAME="QUESTION"',
            "help": "a yes/no watch checked on every stream every 10 s of stream time (repeatable); alert events "
            "begin after 2 yes and end after 2 no (p_yes >= 0.5), with a 30 s cooldown. In --config: "
            "[alerts.NAME] tables with question, streams, every, threshold, on_after, off_after, cooldown, "
            "on_change",
        },
    )
    alert_on_change: bool = field(
        default=False,
        metadata={
            "help": "check the --alert watches only when their stream changed since the last check (a static camera "
            "costs no checks until something moves; see --drop-unchanged)"
        },
    )


@dataclass(frozen=True)
class RunFlags:
    """How the run reports and where its settings come from."""

    log_jsonl: Path | None = field(default=None, metadata={"help": "append every event to this JSON-lines file"})
    quiet: bool = field(default=False, metadata={"help": "do not print a line per clip"})
    config: Path | None = field(default=None, metadata={"help": "TOML file setting any of these options (flags win)"})
    verbose: bool = field(default=False, metadata={"aliases": ("-v",), "help": "debug logging"})


@dataclass(frozen=True)
class TimelineFlags:
    """Where the timeline is and whether questions draw on it (its bounds: timeline.TimelineConfig)."""

    timeline: str | None = field(
        default=None,
        metadata={
            "metavar": "PATH|URL",
            "help": "SQLite file of the timeline (default: timeline.sqlite in $EDGE_ASSISTANT_DATA or "
            '~/.cache/edge-stream-assistant; "" turns it off), or one PostgreSQL database for several boxes: '
            "postgresql://[user@]host[:port]/dbname (password: $EDGE_ASSISTANT_TIMELINE_PASSWORD, $PGPASSWORD or "
            "--timeline-password-file, never in the URL)",
        },
    )
    timeline_password_file: Path | None = field(
        default=None,
        metadata={
            "metavar": "FILE",
            "help": "the PostgreSQL password in this file's first line (mode 600: refused when others may read it)",
        },
    )
    timeline_notes: bool = field(
        default=True,
        metadata={"help": "put the best matching earlier moments into a person's question as short timestamped notes"},
    )


@dataclass(frozen=True)
class PageFlags:
    """Whether to serve the page, and its login (where it listens: ui.config.UIConfig)."""

    ui: bool = field(default=False, metadata={"help": "serve the Gradio page instead of the terminal mode"})
    auth_file: Path | None = field(
        default=None,
        metadata={
            "metavar": "FILE",
            "help": "the page's login: one line user:password in a file only you can read (chmod 600); or set "
            "EDGE_ASSISTANT_AUTH=user:password. Without either, a page beyond loopback gets a login made for the "
            "run, printed once at start",
        },
    )
    # refused with a message (app/config.py): argv is visible to every local user (ps)
    auth: str | None = field(default=None, metadata={"hidden": True, "help": "refused: use --auth-file"})


@dataclass(frozen=True)
class ApiFlags:
    """Whether to serve the HTTP API alone, and its tokens (its limits: api.config.ApiConfig)."""

    api: bool = field(
        default=False,
        metadata={
            "help": "serve the HTTP API alone (no page, headless) on --host/--port; sources optional (add them via "
            "the API)"
        },
    )
    api_tokens_file: Path | None = field(
        default=None,
        metadata={
            "metavar": "FILE",
            "help": "API tokens, one a line: TOKEN SCOPE[,SCOPE...] [NAME] (scopes: read, ask, manage), in a file "
            "only you can read (chmod 600); or set EDGE_ASSISTANT_API_TOKENS. Never on the command line",
        },
    )


OUTPUTS = "alerts and answers out of the box (secrets: environment or files, never flags)"

# every flag group of `python -m app --help`, in order: its title and the config classes whose fields are its
# flags. The outputs' flags come from the output registry (app/cli.py, outputs/registry.py).
FLAG_GROUPS: tuple[tuple[str, tuple[type, ...]], ...] = (
    ("sources (one or more streams, one model)", (SourceFlags, CaptureConfig)),
    ("model", (ModelConfig, SessionConfig)),
    ("bounded KV cache", (CacheConfig, *settings_classes(), RecallFlags)),
    ("what a clip brings (only what changed)", (ChangeConfig,)),
    ("questions and run", (StandingQuestion, RunLimits, WatchFlags, InputLimits, RunFlags)),
    ("timeline: every answer and alert on disk, searchable (python -m app history)", (TimelineFlags, TimelineConfig)),
    (OUTPUTS, ()),
    ("fleet: streams placed across machines with Ray (docs/fleet.md)", (FleetConfig,)),
    (
        "web page (docs/security.md: on loopback no login by default; beyond it a login, generated if none is given)",
        (PageFlags, UIConfig),
    ),
    (
        "HTTP API (docs/api.md): /api/v1/... and OpenAI-compatible /v1/chat/completions, on the page's server with "
        "--ui, alone with --api; on loopback without a token where the page needs no login, else bearer tokens",
        (ApiFlags, ApiConfig),
    ),
)
FLAG_CLASSES = tuple(cls for _, classes in FLAG_GROUPS for cls in classes)
