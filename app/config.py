"""The whole run's settings: one dataclass per component, built once from the command line."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

from app.assistant import RunLimits
from app.outputs import MqttConfig, WebhookConfig
from app.scheduler import StandingQuestion
from app.streams import DEFAULT_STREAM, StreamSpec, derived_name, parse_stream_flag, specs_from_table, unique
from app.timeline import TimelineConfig, default_timeline_path
from app.watches.spec import WatchSpec, check_streams, parse_alert_flag
from app.watches.spec import specs_from_table as watch_specs_from_table
from cache.config import CacheConfig
from capture import CaptureConfig
from model.change import ChangeConfig
from model.config import ModelConfig
from model.session import SessionConfig


@dataclass
class UIConfig:
    """The web page: where it listens and who may use it."""

    host: str = "127.0.0.1"
    port: int = 7860
    share: bool = False
    auth: tuple[str, str] | None = None
    max_upload_mb: int = 500

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise ValueError(f"--port must be 1..65535, got {self.port}")
        if self.max_upload_mb < 1:
            raise ValueError(f"--max-upload-mb must be >= 1, got {self.max_upload_mb}")


@dataclass
class StreamConfig:
    """One stream of the run: its name, how it is captured and its own standing question."""

    name: str
    capture: CaptureConfig
    schedule: StandingQuestion


@dataclass
class AppConfig:
    model: ModelConfig
    cache: CacheConfig
    session: SessionConfig
    schedule: StandingQuestion  # the run's standing question (streams without their own, sources picked in the page)
    limits: RunLimits
    streams: list[StreamConfig]  # empty: the web page picks the source
    watches: list[WatchSpec] = field(default_factory=list)  # yes/no watches (--alert, [alerts.NAME])
    mqtt: MqttConfig | None = None
    timeline: TimelineConfig | None = None  # None: --timeline ""
    timeline_notes: bool = True
    webhooks: list[WebhookConfig] = field(default_factory=list)
    ui: UIConfig | None = None  # None: terminal mode
    log_jsonl: Path | None = None
    show_clips: bool = True
    # --fps, --clip-seconds, --realtime, --loop: for --video/--camera and for sources picked in the page
    capture_settings: dict = field(default_factory=dict)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> AppConfig:
        """Builds and validates every component; raises ValueError naming the flag at fault."""
        if args.video is not None and args.camera is not None:
            raise ValueError("give either --video or --camera, not both (or name several with --stream NAME=SOURCE)")
        specs = _stream_specs(args)
        if not args.ui and not specs:
            raise ValueError(
                "nothing to watch: give --video PATH|URL, --camera INDEX or --stream NAME=SOURCE "
                "(or --ui to pick in the page)"
            )
        capture_settings = {
            "fps": args.fps,
            "clip_seconds": args.clip_seconds,
            "realtime": args.realtime,
            "loop": args.loop,
        }
        streams = []
        for spec in specs:
            try:
                # an offline run over a file (--no-realtime) waits for the model and loses no clip
                capture = CaptureConfig(source=spec.source, block_when_full=not args.realtime, **capture_settings)
                schedule = StandingQuestion(
                    question=spec.question or args.question, every_s=args.every if spec.every is None else spec.every
                )
            except ValueError as err:
                raise ValueError(f"stream {spec.name!r}: {err}") from err
            streams.append(StreamConfig(spec.name, capture, schedule))
        watches = [parse_alert_flag(text, on_change=args.alert_on_change) for text in args.alert or []]
        if args.alert_tables is not None:
            watches += watch_specs_from_table(args.alert_tables)
        check_streams(watches, [s.name for s in streams] or [DEFAULT_STREAM])
        auth = None
        if args.auth:
            user, sep, password = args.auth.partition(":")
            if not sep or not user or not password:
                raise ValueError("--auth must look like user:password")
            auth = (user, password)
        return cls(
            model=ModelConfig(
                model=args.model, device=args.device, dtype=args.dtype, trust_remote_code=args.trust_remote_code
            ),
            cache=CacheConfig(
                policy=args.policy,
                budget=args.budget,
                window=args.window,
                bias=args.bias,
                pool=args.pool,
                pool_mode=args.pool_mode,
                sinks=args.sinks,
                recall=args.recall,
                store_bytes=int(args.store_mb * 2**20),
                block=args.block,
                store_dir=args.store_dir,
                store_quant=args.store_quant,
                positions=args.positions,
            ),
            session=SessionConfig(
                max_new_tokens=args.max_new_tokens,
                chunk_size=args.chunk_size,
                compile_decode=args.compile,
                change=_change(args),
            ),
            schedule=StandingQuestion(question=args.question, every_s=args.every),
            limits=RunLimits(max_rounds=args.max_rounds, duration_s=args.duration, end_with_stream=not args.ui),
            streams=streams,
            watches=watches,
            mqtt=_mqtt(args),
            timeline=_timeline(args),
            timeline_notes=args.timeline_notes,
            webhooks=[_webhook(url, args.webhook_secret_file) for url in args.webhook or []],
            ui=UIConfig(host=args.host, port=args.port, share=args.share, auth=auth, max_upload_mb=args.max_upload_mb)
            if args.ui
            else None,
            log_jsonl=args.log_jsonl,
            show_clips=not args.quiet,
            capture_settings=capture_settings,
        )


def _change(args: argparse.Namespace) -> ChangeConfig:
    return ChangeConfig(
        drop_unchanged=args.drop_unchanged,
        threshold=args.change_threshold,
        keyframe_every=args.keyframe_every,
        floor=args.change_floor,
    )


def _timeline(args: argparse.Namespace) -> TimelineConfig | None:
    if args.timeline == "":
        return None
    path = Path(args.timeline).expanduser() if args.timeline else default_timeline_path()
    return TimelineConfig(path, days=args.timeline_days, max_bytes=int(args.timeline_mb * 2**20))


def _mqtt(args: argparse.Namespace) -> MqttConfig | None:
    if args.mqtt is None:
        return None
    try:
        return MqttConfig.from_environment(
            args.mqtt,
            password_file=args.mqtt_password_file,
            prefix=args.mqtt_prefix,
            discovery=args.mqtt_discovery,
            discovery_prefix=args.mqtt_discovery_prefix,
            ca_file=args.mqtt_ca_file,
        )
    except OSError as err:
        raise ValueError(f"--mqtt-password-file: {err.strerror}: {err.filename}") from err


def _webhook(url: str, secret_file: Path | None) -> WebhookConfig:
    try:
        return WebhookConfig.from_environment(url, secret_file=secret_file)
    except OSError as err:
        raise ValueError(f"--webhook-secret-file: {err.strerror}: {err.filename}") from err


def _stream_specs(args: argparse.Namespace) -> list[StreamSpec]:
    """--video/--camera (one stream named after its source), then --stream flags, then [streams.NAME] tables."""
    specs = []
    source = args.video if args.video is not None else _camera_source(args.camera)
    if source is not None:
        specs.append(StreamSpec(derived_name(source), source))
    specs += [parse_stream_flag(text) for text in args.stream or []]
    if args.stream_tables is not None:
        specs += specs_from_table(args.stream_tables)
    return unique(specs)


def _camera_source(camera: str | None) -> int | str | None:
    if camera is None:
        return None
    if camera.strip().lstrip("-").isdigit():
        index = int(camera)
        if index < 0:
            raise ValueError(f"--camera must be a camera index >= 0 or a gst: pipeline, got {camera}")
        return index
    return camera  # "gst:..." pipelines and device paths are checked by the capture
