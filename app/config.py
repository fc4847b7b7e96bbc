"""The whole run's settings: one dataclass per component, built once from the command line."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.api.auth import given_tokens
from app.api.settings import ApiConfig
from app.assistant import RunLimits
from app.config_flags import dest_of, flag_fields, flag_of, values_from
from app.fleet.config import FleetConfig
from app.input_limits import InputLimits
from app.scheduler import StandingQuestion
from app.sizes import check_sizes
from app.source_credentials import stream_credentials
from app.streams import (
    StreamSpec,
    derived_name,
    parse_stream_flag,
    specs_from_table,
    unique,
    with_credentials_files,
)
from app.watches.spec import WatchSpec, check_streams, parse_alert_flag
from app.watches.spec import specs_from_table as watch_specs_from_table
from bus import DEFAULT_STREAM
from cache.config import CacheConfig
from cache.policies import POLICIES, PolicySettings, settings_classes, settings_for, unused_settings
from capture import CaptureConfig
from capture.gst_pipeline import check_camera_pipeline
from capture.policy import IPNetwork, SourcePolicy, parse_nets
from model.change import ChangeConfig
from model.config import ModelConfig
from model.session import SessionConfig
from outputs.registry import configured_outputs
from timeline import TimelineConfig, timeline_location
from ui.access import AUTH_ENV, given_login, ip_literal, is_loopback
from ui.proxies import proxy_address

HOST_NAME = re.compile(r"[A-Za-z0-9_.-]+")
logger = logging.getLogger(__name__)


@dataclass
class UIConfig:
    """The web page: where it listens and who may use it (ui.access). `auth`: the login given through
    --auth-file or $EDGE_ASSISTANT_AUTH (never argv); `no_login`: --open, no login even beyond loopback;
    `allowed_hosts`: extra names accepted in the Host header (--allowed-host)."""

    host: str = "127.0.0.1"
    port: int = 7860
    share: bool = False
    auth: tuple[str, str] | None = field(default=None, repr=False)
    max_upload_mb: int = 500
    max_uploads: int = 20  # files uploaded per run (ui.upload_limits)
    max_upload_total_mb: int = 2000  # their MiB together
    no_login: bool = False
    allowed_hosts: tuple[str, ...] = ()
    trusted_proxies: tuple[str, ...] = ()  # --trusted-proxy: whose X-Forwarded-For names the client (ui.proxies)

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise ValueError(f"--port must be 1..65535, got {self.port}")
        if self.max_upload_mb < 1:
            raise ValueError(f"--max-upload-mb must be >= 1, got {self.max_upload_mb}")
        if self.max_uploads < 1 or self.max_upload_total_mb < 1:
            raise ValueError("--max-uploads and --max-upload-total-mb must be >= 1")
        if self.no_login and self.auth is not None:
            raise ValueError(f"--open serves the page without a login: drop --auth-file / ${AUTH_ENV}, or --open")
        for name in self.allowed_hosts:
            if not HOST_NAME.fullmatch(name) and ip_literal(name) is None:
                raise ValueError(f"--allowed-host takes a host name or address without scheme or port, got {name!r}")
        self.allowed_hosts = tuple(name.lower().rstrip(".") for name in self.allowed_hosts)
        self.trusted_proxies = tuple(proxy_address(text) for text in self.trusted_proxies)
        if self.behind_proxy and not self.beyond_loopback and self.auth is None and not self.no_login:
            flag = "--allowed-host" if self.allowed_hosts else "--trusted-proxy"
            raise ValueError(
                f"{flag} means the page is reached through a reverse proxy, so others can reach it: give it a login "
                f"(--auth-file FILE with one line user:password, chmod 600, or ${AUTH_ENV}), or --open to serve "
                "it without one"
            )

    @property
    def beyond_loopback(self) -> bool:
        """Whether anything but this machine can reach the page (a non-loopback --host, or --share)."""
        return self.share or not is_loopback(self.host)

    @property
    def behind_proxy(self) -> bool:
        """Whether the operator says a reverse proxy serves the page (--allowed-host, --trusted-proxy)."""
        return bool(self.allowed_hosts or self.trusted_proxies)

    @property
    def reachable_from_network(self) -> bool:
        """Beyond loopback, or through a proxy: who is not on this machine may reach the page."""
        return self.beyond_loopback or self.behind_proxy


@dataclass
class StreamConfig:
    """One stream of the run: its name, how it is captured, its own standing question and (the fleet) the node
    it must run on."""

    name: str
    capture: CaptureConfig
    schedule: StandingQuestion
    node: str | None = None


@dataclass
class AppConfig:
    model: ModelConfig
    cache: CacheConfig
    session: SessionConfig
    schedule: StandingQuestion  # the run's standing question (streams without their own, sources picked in the page)
    limits: RunLimits
    streams: list[StreamConfig]  # empty: the web page picks the source
    watches: list[WatchSpec] = field(default_factory=list)  # yes/no watches (--alert, [alerts.NAME])
    # the configured outputs: a registered output's name -> the settings of each one turned on (outputs/registry.py)
    outputs: dict[str, list[Any]] = field(default_factory=dict)
    timeline: TimelineConfig | None = None  # None: --timeline ""
    timeline_notes: bool = True
    ui: UIConfig | None = None  # None: terminal mode
    log_jsonl: Path | None = None
    show_clips: bool = True
    # --fps, --clip-seconds, --realtime, --loop: for --video/--camera and for sources picked in the page
    capture_settings: dict = field(default_factory=dict)
    input_limits: InputLimits = field(default_factory=InputLimits)  # --max-question-chars, --max-pending-questions
    max_streams: int = 8  # configured and added streams together
    allow_source_nets: tuple[IPNetwork, ...] = ()  # where sources chosen while running may reach non-public hosts
    fleet: FleetConfig | None = None  # --ray: the streams run on the hosts of a Ray cluster (app/fleet)
    api: ApiConfig = field(default_factory=ApiConfig)  # the HTTP API (with --ui, or alone with --api)

    def source_policy(self, upload_dirs: tuple[Path, ...] = ()) -> SourcePolicy:
        """What may be watched when chosen while running (page, terminal): capture.policy."""
        cameras = frozenset(s.capture.spec.target for s in self.streams if s.capture.spec.kind == "camera")
        return SourcePolicy(self.allow_source_nets, cameras, upload_dirs)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> AppConfig:
        """Builds and validates every component; raises ValueError naming the flag at fault."""
        if args.auth is not None:
            raise ValueError(
                "--auth is refused: a password on the command line is visible to every user of this machine (ps); "
                f"put user:password in a file only you can read and pass --auth-file FILE, or set ${AUTH_ENV}"
            )
        check_sizes(args)
        if args.video is not None and args.camera is not None:
            raise ValueError("give either --video or --camera, not both (or name several with --stream NAME=SOURCE)")
        max_streams = _max_streams(args.max_streams)
        specs = _stream_specs(args)
        if len(specs) > max_streams and args.ray is None:  # a fleet's --max-streams is per host
            raise ValueError(
                f"{len(specs)} streams are configured, more than --max-streams {max_streams}; watch fewer streams "
                "or raise --max-streams (each stream costs its threads, decoder, frame buffers and KV cache)"
            )
        for spec in specs:
            if isinstance(spec.source, str) and spec.source.startswith("gst:"):
                try:
                    check_camera_pipeline(spec.source[4:].strip())
                except ValueError as err:
                    raise ValueError(f"stream {spec.name!r}: {err}") from err
        allow_source_nets = _nets(args.allow_source_nets)
        serving = args.ui or getattr(args, "api", False)
        if not serving and not specs:
            raise ValueError(
                "nothing to watch: give --video PATH|URL, --camera INDEX or --stream NAME=SOURCE "
                "(or --ui to pick in the page)"
            )
        ui = _ui(args) if serving else None
        capture_settings = {**values_from(args, CaptureConfig), "realtime": args.realtime, "loop": args.loop}
        streams = []
        for spec in specs:
            try:
                # an offline run over a file (--no-realtime) waits for the model and loses no clip
                capture = CaptureConfig(
                    source=spec.source,
                    block_when_full=not args.realtime,
                    credentials=stream_credentials(spec),
                    **capture_settings,
                )
                schedule = StandingQuestion(
                    question=spec.question or args.question, every_s=args.every if spec.every is None else spec.every
                )
            except ValueError as err:
                raise ValueError(f"stream {spec.name!r}: {err}") from err
            streams.append(StreamConfig(spec.name, capture, schedule, spec.node))
        watches = [parse_alert_flag(text, on_change=args.alert_on_change) for text in args.alert or []]
        if args.alert_tables is not None:
            watches += watch_specs_from_table(args.alert_tables)
        check_streams(watches, [s.name for s in streams] or [DEFAULT_STREAM])
        return cls(
            model=ModelConfig(
                model=args.model, device=args.device, dtype=args.dtype, trust_remote_code=args.trust_remote_code
            ),
            cache=CacheConfig(
                **values_from(args, CacheConfig),
                policy_settings=_policy_settings(args),
                recall=args.recall,
                store_bytes=int(args.store_mb * 2**20),
            ),
            session=SessionConfig(
                max_new_tokens=args.max_new_tokens,
                chunk_size=args.chunk_size,
                compile_decode=args.compile,
                change=_change(args),
            ),
            schedule=StandingQuestion(**values_from(args, StandingQuestion)),
            limits=RunLimits(max_rounds=args.max_rounds, duration_s=args.duration, end_with_stream=not serving),
            streams=streams,
            watches=watches,
            outputs=configured_outputs(lambda settings_class: values_from(args, settings_class)),
            timeline=_timeline(args),
            timeline_notes=args.timeline_notes,
            ui=ui,
            log_jsonl=args.log_jsonl,
            show_clips=not args.quiet,
            capture_settings=capture_settings,
            input_limits=InputLimits(
                max_question_chars=args.max_question_chars, max_pending=args.max_pending_questions
            ),
            max_streams=max_streams,
            allow_source_nets=allow_source_nets,
            fleet=_fleet(args, streams),
            api=_api(args, ui),
        )


def _api(args: argparse.Namespace, ui: UIConfig | None) -> ApiConfig:
    """--api, --api-tokens-file / $EDGE_ASSISTANT_API_TOKENS and the API's limits. --api where the page would need
    a login (beyond loopback, or a login given) and no token is given: refused (exit 2) before the model loads."""
    headless = bool(getattr(args, "api", False)) and not args.ui
    if headless and getattr(args, "ray", None) is not None:
        raise ValueError("--api with --ray is not served yet: use --ui with --ray for the fleet's page")
    tokens = given_tokens(getattr(args, "api_tokens_file", None), os.environ)
    if headless and not tokens and ui is not None and (ui.auth is not None or (ui.beyond_loopback and not ui.no_login)):
        raise ValueError(
            "--api beyond loopback (or with a page login) needs API tokens: --api-tokens-file FILE (lines TOKEN "
            "SCOPE[,SCOPE...] [NAME], chmod 600) or $EDGE_ASSISTANT_API_TOKENS"
        )
    return ApiConfig(headless=headless, tokens=tokens, **values_from(args, ApiConfig))


def _ui(args: argparse.Namespace) -> UIConfig:
    return UIConfig(
        host=args.host,
        port=args.port,
        share=args.share,
        auth=given_login(args.auth_file, os.environ),
        max_upload_mb=args.max_upload_mb,
        max_uploads=args.max_uploads,
        max_upload_total_mb=args.max_upload_total_mb,
        no_login=args.open,
        allowed_hosts=tuple(args.allowed_host or ()),
        trusted_proxies=tuple(args.trusted_proxy or ()),
    )


def _fleet(args: argparse.Namespace, streams: list[StreamConfig]) -> FleetConfig | None:
    address = getattr(args, "ray", None)
    if address is None:
        pinned = [s.name for s in streams if s.node]
        if pinned:
            raise ValueError(f"stream(s) {', '.join(pinned)} name a node: that is for a fleet (add --ray ADDRESS)")
        return None
    if args.ui and not streams:
        raise ValueError(
            "the fleet's page starts with the streams given: name at least one with --stream NAME=SOURCE or a "
            "[streams.NAME] table (more can be added from the page)"
        )
    return FleetConfig(address=address.strip(), **values_from(args, FleetConfig))


def _max_streams(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"--max-streams must be a whole number >= 1, got {value!r}")
    return value


def _nets(values: object) -> tuple[IPNetwork, ...]:
    if values is None:
        return ()
    if not isinstance(values, list):
        raise ValueError(f"allow_source_nets must be a list of CIDR strings (e.g. ['192.168.1.0/24']), got {values!r}")
    return parse_nets(values)


def _policy_settings(args: argparse.Namespace) -> PolicySettings:
    """The chosen policy's own settings from its flags. A flag of another policy (--sinks with inf-mllm) does not
    apply: it is ignored, with a warning when it was set (flag or --config key) away from its default."""
    fields = {f.name: f for cls in settings_classes() for f in flag_fields(cls)}
    values = {name: getattr(args, dest_of(f)) for name, f in fields.items()}
    for name in unused_settings(args.policy, **values):
        owners = [p for p, cls in POLICIES.items() if name in {f.name for f in dataclasses.fields(cls.settings_class)}]
        logger.warning(
            "%s is a setting of %s, not of --policy %s: ignored", flag_of(fields[name]), ", ".join(owners), args.policy
        )
    return settings_for(args.policy, **values)


def _change(args: argparse.Namespace) -> ChangeConfig:
    return ChangeConfig(**values_from(args, ChangeConfig))


def _timeline(args: argparse.Namespace) -> TimelineConfig | None:
    if args.timeline == "":
        return None
    path = timeline_location(args.timeline, getattr(args, "timeline_password_file", None))
    return TimelineConfig(path, days=args.timeline_days, max_bytes=int(args.timeline_mb * 2**20))


def _stream_specs(args: argparse.Namespace) -> list[StreamSpec]:
    """--video/--camera (one stream named after its source), then --stream flags, then [streams.NAME] tables."""
    specs = []
    source = args.video if args.video is not None else _camera_source(args.camera)
    if source is not None:
        specs.append(StreamSpec(derived_name(source), source))
    specs += [parse_stream_flag(text) for text in args.stream or []]
    if args.stream_tables is not None:
        specs += specs_from_table(args.stream_tables)
    return with_credentials_files(unique(specs), getattr(args, "stream_credentials_file", None) or [])


def _camera_source(camera: str | None) -> int | str | None:
    if camera is None:
        return None
    if camera.strip().lstrip("-").isdigit():
        index = int(camera)
        if index < 0:
            raise ValueError(f"--camera must be a camera index >= 0 or a gst: pipeline, got {camera}")
        return index
    return camera  # "gst:..." pipelines and device paths are checked by the capture
