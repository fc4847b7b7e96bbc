"""The whole run's settings: one dataclass per component, built once from the command line."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from api.config import ApiConfig, given_tokens
from app.config_flags import dest_of, flag_fields, flag_of, values_from
from app.flags import ApiFlags, PageFlags, RecallFlags, RunFlags, SourceFlags, TimelineFlags, WatchFlags
from app.fleet_config import FleetConfig
from app.run_limits import RunLimits
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
from bus import DEFAULT_STREAM
from bus.input_limits import InputLimits
from cache.config import CacheConfig
from cache.policies import POLICIES, PolicySettings, settings_classes, settings_for, unused_settings
from capture import CaptureConfig
from capture.gst_pipeline import check_camera_pipeline
from capture.policy import IPNetwork, SourcePolicy, parse_nets
from model.change import ChangeConfig
from model.config import ModelConfig
from model.session_config import SessionConfig
from outputs.registry import configured_outputs
from timeline import TimelineConfig, timeline_location
from ui.access import AUTH_ENV, given_login
from ui.config import UIConfig
from watches.scheduler import StandingQuestion
from watches.spec import WatchSpec, check_streams, parse_alert_flag
from watches.spec import specs_from_table as watch_specs_from_table

__all__ = ["AppConfig", "StreamConfig", "UIConfig"]

logger = logging.getLogger(__name__)
T = TypeVar("T")


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
    timeline_notes: bool = TimelineFlags.timeline_notes
    ui: UIConfig | None = None  # None: terminal mode
    log_jsonl: Path | None = None
    show_clips: bool = True
    # --fps, --clip-seconds, --realtime, --loop: for --video/--camera and for sources picked in the page
    capture_settings: dict = field(default_factory=dict)
    input_limits: InputLimits = field(default_factory=InputLimits)  # --max-question-chars, --max-pending-questions
    max_streams: int = SourceFlags.max_streams  # configured and added streams together
    allow_source_nets: tuple[IPNetwork, ...] = ()  # where sources chosen while running may reach non-public hosts
    fleet: FleetConfig | None = None  # --ray: the streams run on the hosts of a Ray cluster (fleet/)
    api: ApiConfig = field(default_factory=ApiConfig)  # the HTTP API (with --ui, or alone with --api)

    def source_policy(self, upload_dirs: tuple[Path, ...] = ()) -> SourcePolicy:
        """What may be watched when chosen while running (page, terminal): capture.policy."""
        cameras = frozenset(s.capture.spec.target for s in self.streams if s.capture.spec.kind == "camera")
        return SourcePolicy(self.allow_source_nets, cameras, upload_dirs)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> AppConfig:
        """Builds and validates every component from the parsed flags (app/flags.py, app/config_flags.py);
        raises ValueError naming the flag at fault."""
        source, page, run = _flags(args, SourceFlags), _flags(args, PageFlags), _flags(args, RunFlags)
        if page.auth is not None:
            raise ValueError(
                "--auth is refused: a password on the command line is visible to every user of this machine (ps); "
                f"put user:password in a file only you can read and pass --auth-file FILE, or set ${AUTH_ENV}"
            )
        check_sizes(args)
        if source.video is not None and source.camera is not None:
            raise ValueError("give either --video or --camera, not both (or name several with --stream NAME=SOURCE)")
        max_streams = _max_streams(source.max_streams)
        specs = _stream_specs(source, args.stream_tables)
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
        allow_source_nets = parse_nets(source.allow_source_nets)
        api = _flags(args, ApiFlags)
        serving = page.ui or api.api  # a page or the API: sources may come while running
        if not serving and not specs:
            raise ValueError(
                "nothing to watch: give --video PATH|URL, --camera INDEX or --stream NAME=SOURCE "
                "(or --ui to pick in the page, --api to add them through the API)"
            )
        ui = _ui(args, page, api) if serving else None
        capture_settings = {**values_from(args, CaptureConfig), "realtime": source.realtime}  # --fps ... --loop
        streams = []
        for spec in specs:
            try:
                # an offline run over a file (--no-realtime) waits for the model and loses no clip
                capture = CaptureConfig(
                    source=spec.source,
                    block_when_full=not source.realtime,
                    credentials=stream_credentials(spec),
                    **capture_settings,
                )
                schedule = StandingQuestion(
                    question=spec.question or args.question, every_s=args.every if spec.every is None else spec.every
                )
            except ValueError as err:
                raise ValueError(f"stream {spec.name!r}: {err}") from err
            streams.append(StreamConfig(spec.name, capture, schedule, spec.node))
        alerts = _flags(args, WatchFlags)
        watches = [parse_alert_flag(text, on_change=alerts.alert_on_change) for text in alerts.alert]
        if args.alert_tables is not None:
            watches += watch_specs_from_table(args.alert_tables)
        check_streams(watches, [s.name for s in streams] or [DEFAULT_STREAM])
        return cls(
            model=ModelConfig(**values_from(args, ModelConfig)),
            cache=CacheConfig(
                **values_from(args, CacheConfig),
                **values_from(args, RecallFlags),
                policy_settings=_policy_settings(args),
            ),
            session=SessionConfig(**values_from(args, SessionConfig), change=_flags(args, ChangeConfig)),
            schedule=_flags(args, StandingQuestion),
            limits=RunLimits(**values_from(args, RunLimits), end_with_stream=not serving),
            streams=streams,
            watches=watches,
            outputs=configured_outputs(lambda settings_class: values_from(args, settings_class)),
            timeline=_timeline(args),
            timeline_notes=_flags(args, TimelineFlags).timeline_notes,
            ui=ui,
            log_jsonl=run.log_jsonl,
            show_clips=not run.quiet,
            capture_settings=capture_settings,
            input_limits=_flags(args, InputLimits),
            max_streams=max_streams,
            allow_source_nets=allow_source_nets,
            fleet=_fleet(args, page, streams),
            api=_api(args, api, page, ui),
        )


def _flags(args: argparse.Namespace, config_class: type[T]) -> T:
    """`config_class` built from its flags alone (every other field keeps its default)."""
    return config_class(**values_from(args, config_class))


def _api(args: argparse.Namespace, flags: ApiFlags, page: PageFlags, ui: UIConfig | None) -> ApiConfig:
    """--api, --api-tokens-file / $EDGE_ASSISTANT_API_TOKENS and the API's limits. --api where the page would need
    a login (beyond loopback, or a login given) and no token is given: refused (exit 2) before the model loads."""
    headless = flags.api and not page.ui
    tokens = given_tokens(flags.api_tokens_file, os.environ)
    reached = ui is not None and (ui.beyond_loopback or ui.behind_proxy) and not ui.no_login
    if headless and not tokens and ui is not None and (ui.auth is not None or reached):
        raise ValueError(
            "--api beyond loopback or behind a proxy (or with a page login) needs API tokens: --api-tokens-file FILE "
            "(lines TOKEN SCOPE[,SCOPE...] [NAME], chmod 600) or $EDGE_ASSISTANT_API_TOKENS"
        )
    return ApiConfig(headless=headless, tokens=tokens, **values_from(args, ApiConfig))


def _ui(args: argparse.Namespace, page: PageFlags, api: ApiFlags) -> UIConfig:
    login = given_login(page.auth_file, os.environ)
    return UIConfig(**values_from(args, UIConfig), auth=login, headless_api=api.api and not page.ui)


def _fleet(args: argparse.Namespace, page: PageFlags, streams: list[StreamConfig]) -> FleetConfig | None:
    values = values_from(args, FleetConfig)
    if values["address"] is None:
        pinned = [s.name for s in streams if s.node]
        if pinned:
            raise ValueError(f"stream(s) {', '.join(pinned)} name a node: that is for a fleet (add --ray ADDRESS)")
        return None
    if page.ui and not streams:
        raise ValueError(
            "the fleet's page starts with the streams given: name at least one with --stream NAME=SOURCE or a "
            "[streams.NAME] table (more can be added from the page)"
        )
    return FleetConfig(**{**values, "address": values["address"].strip()})


def _max_streams(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"--max-streams must be a whole number >= 1, got {value!r}")
    return value


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


def _timeline(args: argparse.Namespace) -> TimelineConfig | None:
    where = _flags(args, TimelineFlags)
    if where.timeline == "":
        return None
    path = timeline_location(where.timeline, where.timeline_password_file)
    return TimelineConfig(path, **values_from(args, TimelineConfig))


def _stream_specs(source: SourceFlags, tables: dict | None) -> list[StreamSpec]:
    """--video/--camera (one stream named after its source), then --stream flags, then [streams.NAME] tables."""
    specs = []
    given = source.video if source.video is not None else _camera_source(source.camera)
    if given is not None:
        specs.append(StreamSpec(derived_name(given), given))
    specs += [parse_stream_flag(text) for text in source.stream]
    if tables is not None:
        specs += specs_from_table(tables)
    return with_credentials_files(unique(specs), list(source.stream_credentials_file))


def _camera_source(camera: str | None) -> int | str | None:
    if camera is None:
        return None
    if camera.strip().lstrip("-").isdigit():
        index = int(camera)
        if index < 0:
            raise ValueError(f"--camera must be a camera index >= 0 or a gst: pipeline, got {camera}")
        return index
    return camera  # "gst:..." pipelines and device paths are checked by the capture
