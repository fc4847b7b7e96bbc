"""What both front ends (terminal and web page) share: check the source, load the model, build the
session (every failure is a `StartupError` whose message the CLI prints before exiting with code 2),
then wire the assistant to its event bus, log and memory monitor, and take it all down again."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import psutil
import torch

from app.admission import AdmissionError, CaptureShape
from app.assistant import Assistant
from app.commands import RunCommands
from app.config import AppConfig
from app.stream import Stream
from app.stream_factory import StreamFactory
from bus import DEFAULT_STREAM, ErrorEvent, Event, EventBus, Status, StatusKind, Subscriber
from bus.desk import Desk
from bus.redact import redact_source, redacted
from bus.worker import QueuedSubscriber
from cache.attention import register_attention
from cache.cpu.kernels import build_in_background, kernels_ready
from cache.cpu.layouts import tune_linear_layouts
from cache.store.host_store import default_store_bytes
from capture import SourceError, open_source
from model.config import resolve_device, resolve_dtype
from model.loading import LoadedModel, ModelLoadError, load_model
from model.quantize import quantize_model
from monitor.memory_monitor import MemoryMonitor
from outputs import OutputPublisher
from outputs.commands import CommandsSlot
from outputs.event_log import JsonlLog, queued_log
from outputs.registry import SinkContext, build_sinks, wanted_types
from timeline import TimelineError, TimelineWriter
from timeline.notes import TimelineNotes
from watches.runtime import RuntimeWatches, WatchLimits, runtime_watch_folder, state_path

logger = logging.getLogger(__name__)

EXIT_BAD_INPUT = 2


class StartupError(Exception):
    """The run cannot start: a bad source, model or setting. The message says which and what to try."""


def fail(message: str) -> int:
    print(f"error: {redact_source(message)}", file=sys.stderr)
    return EXIT_BAD_INPUT


def probe_sources(config: AppConfig) -> None:
    """Opens and closes each file and camera once, so a bad one fails before the model loads (SourceError).
    Network sources are not probed: one that is down starts reconnecting while the others run."""
    for stream in config.streams:
        if stream.capture.spec.kind != "url":
            try:
                open_source(stream.capture).close()
            except SourceError as err:
                raise SourceError(f"stream {stream.name!r}: {err}") from err


def start_session(config: AppConfig) -> tuple[LoadedModel, list[Stream], StreamFactory]:
    """Checks the sources, loads the model once and builds one streaming session per stream (admission:
    refuses streams whose bounded memory does not fit, with the arithmetic)."""
    try:
        probe_sources(config)
        if config.timeline is not None:
            TimelineWriter(config.timeline).close()  # a timeline that cannot be opened fails before the model loads
        if config.log_jsonl is not None:
            JsonlLog(config.log_jsonl).close()  # ... and so does an event log (a link, another user's file)
    except (SourceError, TimelineError) as err:
        raise StartupError(str(err)) from err
    except OSError as err:
        raise StartupError(f"cannot write --log-jsonl {config.log_jsonl}: {err.strerror or err}") from err
    print(f"loading {config.model.model} ...", file=sys.stderr, flush=True)
    try:
        device = resolve_device(config.model.device)
        if config.model.quantize == "int8" and device.type != "cpu":
            raise StartupError(f"--quantize int8 runs on the CPU; this run would use {device}: add --device cpu")
        if device.type == "cpu" and resolve_dtype(config.model.dtype, device) == torch.float32:
            print("preparing the CPU decode kernels meanwhile (built once per machine) ...", file=sys.stderr)
            build_in_background()  # a first build (20-60 s) overlaps the model's loading
        loaded = load_model(config.model, text_attention=register_attention())
        kernels_note = ""
        if loaded.device.type == "cpu":
            used = loaded.dtype == torch.float32 and kernels_ready()  # the kernels are fp32 only; waits for the build
            kernels_note = f", CPU kernels {'on' if used else 'off'}"
            if config.model.quantize == "int8":
                if not used:
                    print("int8 without the CPU kernels runs slower than fp32 (see the log)", file=sys.stderr)
                print(quantize_model(loaded.model).describe(), file=sys.stderr, flush=True)
            tune_linear_layouts(loaded.model)  # the fastest one-row product per weight shape (README, decode)
        factory = stream_factory(config, loaded)
        try:
            print(f"memory: {factory.admit(len(config.streams))}", file=sys.stderr)
        except AdmissionError as err:
            raise AdmissionError(f"the streams do not fit in memory: {err}") from err
        streams = [factory.build(s.name, s.schedule) for s in config.streams]
        if not streams:
            streams = [factory.build(DEFAULT_STREAM, config.schedule)]
        session = streams[0].session
    except (ModelLoadError, ValueError) as err:
        raise StartupError(str(err)) from err
    settings = config.cache.policy_settings.describe()  # the policy's own, e.g. "bias 0.001, pool 8 (span)"
    print(
        f"model ready: {loaded.family} on {loaded.device} ({str(loaded.dtype).removeprefix('torch.')}); "
        f"cache: {config.cache.policy}, budget {config.cache.budget}, window {config.cache.window}"
        f"{', ' + settings if settings else ''}; "
        f"decode: {'compiled' if session.runner.decoder.compiled else 'eager'}" + kernels_note,
        file=sys.stderr,
        flush=True,
    )
    return loaded, streams, factory


def stream_factory(config: AppConfig, loaded: LoadedModel, share_between: int | None = None) -> StreamFactory:
    """How the run's streams are built, at start and when one is added from the page. An automatic host-store
    bound is shared out between the configured streams (or `share_between` streams: a fleet host, which runs
    at most --max-streams); an added stream gets the same share."""
    cache = config.cache
    if cache.recall and not cache.store_bytes:
        shares = share_between if share_between is not None else len(config.streams)
        cache = replace(cache, store_bytes=default_store_bytes() // max(shares, 1))
    schedule = config.schedule
    settings = config.capture_settings
    capture = CaptureShape(loaded.adapter.frame_size(), settings.get("fps", 1.0), settings.get("clip_seconds", 4.0))
    return StreamFactory(
        loaded,
        cache,
        config.session,
        schedule.question,
        schedule.every_s,
        config.watches,
        capture,
        getattr(config, "max_streams", 8),
    )


def memory_fields(monitor: MemoryMonitor):
    """Extra answer-event fields: the memory monitor's reading, and this process's OS threads (FFmpeg's
    and torch's included) and open file descriptors, so a long run shows whether either leaks."""
    process = psutil.Process()

    def sample() -> dict:
        s = monitor.sample()
        return {
            "memory_backend": s.backend,
            "memory_label": s.label,
            "device_used_bytes": s.device_used_bytes,
            "device_total_bytes": s.device_total_bytes,
            "process_threads": process.num_threads(),
            "process_open_fds": process.num_fds(),
        }

    return sample


@dataclass
class Running:
    """One run's assistant and what it reports to; `close()` stops and joins everything."""

    assistant: Assistant
    bus: EventBus
    monitor: MemoryMonitor
    log: JsonlLog | None
    publisher: OutputPublisher | None = None
    timeline: TimelineWriter | None = None
    writers: list[QueuedSubscriber] = field(default_factory=list)  # the log and the terminal, off the model thread
    watches: RuntimeWatches | None = None  # the watches set while running (API, MQTT commands, page, terminal)
    commands: CommandsSlot | None = None  # what the outputs' commands (--mqtt-commands) reach: bound once all runs

    def watch_configured_sources(self, config: AppConfig, loaded: LoadedModel) -> None:
        """Starts watching every configured stream, resized for the model (SourceError if a file or camera
        cannot be opened; a network stream that is down starts reconnecting)."""
        for stream in config.streams:
            capture = replace(stream.capture, max_size=loaded.adapter.frame_size())
            try:
                self.assistant.watch(capture, stream=stream.name, allow_down=True)
            except SourceError as err:
                raise SourceError(f"stream {stream.name!r}: {err}") from err

    def close(self) -> None:
        if self.commands is not None:
            self.commands.unbind()  # commands arriving from now on are refused as not ready
        if self.watches is not None:
            self.bus.unsubscribe(self.watches)
            self.watches.close()
        stopped = self.assistant.stop()  # its last event ("assistant stopped") also reaches the outputs
        if self.publisher is not None:
            self.bus.unsubscribe(self.publisher)
            self.publisher.close(timeout=5.0)
        if self.timeline is not None:
            self.bus.unsubscribe(self.timeline)
            self.timeline.close(timeout=5.0)
        self.monitor.close()
        for writer in self.writers:  # after the outputs and the timeline: their last errors are written too
            self.bus.unsubscribe(writer)
            writer.close(timeout=5.0)
        if self.log is not None:
            self.log.close()
        if not stopped:
            logger.warning("the model worker did not stop in time")


def build_assistant(
    config: AppConfig,
    streams: list[Stream],
    monitor: MemoryMonitor,
    displays: list[Subscriber],
    factory: StreamFactory | None = None,
    writers: Sequence[Subscriber] = (),
) -> Running:
    """The assistant (not started yet), its event bus with `displays` (called on the publishing thread),
    `writers` (the terminal printer: each on its own `bus.worker` thread) and the --log-jsonl file (the same)
    subscribed. factory: how streams added while it runs are built (None: it cannot add streams)."""
    bus = EventBus()
    for display in displays:
        bus.subscribe(display)
    log = JsonlLog(config.log_jsonl) if config.log_jsonl else None
    # what writes to a terminal or a file runs behind its own bounded queue and thread, never on the model's
    queued = [QueuedSubscriber("terminal", writer) for writer in writers]
    queued += [queued_log(log)] if log is not None else []
    for writer in queued:
        bus.subscribe(writer)
    bus.publish(
        redacted(Status(kind=StatusKind.MEMORY_MONITOR, message=f"memory monitor: {monitor.backend} ({monitor.label})"))
    )
    commands = CommandsSlot()  # the outputs start first; the assistant and its watches are bound below
    publisher = _publisher(config, streams, bus, commands)
    timeline = start_timeline_writer(config, bus, log)
    notes = TimelineNotes(config.timeline.path) if config.timeline is not None and config.timeline_notes else None
    assistant = Assistant(
        streams,
        bus,
        config.limits,
        memory_sample=memory_fields(monitor),
        notes=notes,
        factory=factory,
        input_limits=config.input_limits,
    )
    for writer in queued:
        writer.start()
    watches = runtime_watches(config, assistant)
    take_commands(commands, assistant, watches, bus, config)
    return Running(assistant, bus, monitor, log, publisher, timeline, queued, watches, commands)


def take_commands(
    slot: CommandsSlot, desk: Desk, watches: RuntimeWatches, bus: EventBus, config: AppConfig
) -> Callable[[], None]:
    """Binds the outputs' commands (`slot`, which the outputs were started with) to `desk` and `watches`, one box
    or a fleet alike, with the API's limits per owner; returns what unbinds them (commands are then refused as not
    ready)."""
    commands = RunCommands(desk, watches, config.api.questions_per_token, config.api.answer_timeout_s)
    bus.subscribe(commands)
    slot.bind(commands)

    def unbind() -> None:
        slot.unbind()
        bus.unsubscribe(commands)

    return unbind


def runtime_watches(config: AppConfig, assistant: Assistant) -> RuntimeWatches:
    """The watches set while running (by the API, MQTT commands, the page or the terminal), subscribed to the
    bus and started: those kept in the state file beside the timeline are loaded and applied (queued for the
    model worker). With the timeline off (--timeline "") they last only the run."""
    folder = runtime_watch_folder(config)
    watches = RuntimeWatches(
        assistant,
        configured=config.watches,
        path=None if folder is None else state_path(folder),
        limits=WatchLimits(per_owner=config.api.watches_per_token, total=config.api.max_watches),
    )
    assistant.bus.subscribe(watches)
    watches.start()
    return watches


def start_timeline_writer(config: AppConfig, bus: EventBus, log: JsonlLog | None) -> TimelineWriter | None:
    """The timeline's writer (its own thread, behind a bounded queue), subscribed to the bus; None when off.
    Raises StartupError (exit 2) when the file cannot be opened, saying what to do."""
    if config.timeline is None:
        return None

    def report(message: str) -> None:
        bus.publish(redacted(ErrorEvent(where="timeline", message=message)))

    def recovered(message: str) -> None:
        bus.publish(redacted(Status(kind=StatusKind.INFO, message=message)))

    try:
        writer = TimelineWriter(config.timeline, on_error=report, on_recover=recovered)
    except TimelineError as err:
        if log is not None:
            log.close()
        raise StartupError(str(err)) from err
    print(f"timeline: {config.timeline.where} (python -m app history TEXT searches it)", file=sys.stderr)
    bus.subscribe(writer)
    writer.start()
    return writer


def _publisher(
    config: AppConfig, streams: list[Stream], bus: EventBus, commands: CommandsSlot
) -> OutputPublisher | None:
    return start_publisher(config, {s.name: [w.spec.name for w in s.watches] for s in streams}, bus, commands)


def start_publisher(
    config: AppConfig, alerts: dict[str, list[str]], bus: EventBus, commands: CommandsSlot | None = None
) -> OutputPublisher | None:
    """The configured outputs (`config.outputs`, from outputs/registry.py) behind one bounded queue off the model
    worker, which takes only the event types they want; None when no output is configured. alerts: stream -> the
    names of its watches (announced to Home Assistant). commands: what outputs that take commands reach (None:
    none taken). What they cannot deliver is reported as `error` events (where: outputs), never raised."""
    if not config.outputs:
        return None

    def report(message: str) -> None:
        bus.publish(redacted(ErrorEvent(where="outputs", message=message)))

    made: list[OutputPublisher] = []  # what a digest is delivered to: the publisher, made once the sinks are

    def deliver(event: Event) -> None:
        made[0](event)

    context = SinkContext(report, alerts, commands, timeline=config.timeline, deliver=deliver)
    sinks = build_sinks(config.outputs, context)
    publisher = OutputPublisher(sinks, on_error=report, wants=wanted_types(config.outputs))
    made.append(publisher)
    bus.subscribe(publisher)
    publisher.start()
    return publisher
