"""What both front ends (terminal and web page) share: check the source, load the model, build the
session (every failure is a `StartupError` whose message the CLI prints before exiting with code 2),
then wire the assistant to its event bus, log and memory monitor, and take it all down again."""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass, replace

import psutil
import torch

from app.assistant import Assistant
from app.config import AppConfig
from app.events import EventBus, JsonlLog, Subscriber, make_event
from cache.attention import register_attention
from cache.cpu.kernels import build_in_background, kernels_ready
from cache.cpu.layouts import tune_linear_layouts
from capture import SourceError, open_source
from model.config import resolve_device, resolve_dtype
from model.loading import LoadedModel, ModelLoadError, load_model
from model.session import StreamingSession
from ui.memory_monitor import MemoryMonitor

logger = logging.getLogger(__name__)

EXIT_BAD_INPUT = 2


class StartupError(Exception):
    """The run cannot start: a bad source, model or setting. The message says which and what to try."""


def fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def probe_source(config: AppConfig) -> None:
    """Opens and closes the source once, so a bad one fails before the model loads (SourceError)."""
    open_source(config.capture).close()


def start_session(config: AppConfig) -> tuple[LoadedModel, StreamingSession]:
    """Checks the source (if any), loads the model and builds the streaming session."""
    if config.capture is not None:
        try:
            probe_source(config)
        except SourceError as err:
            raise StartupError(str(err)) from err
    print(f"loading {config.model.model} ...", file=sys.stderr, flush=True)
    try:
        device = resolve_device(config.model.device)
        if device.type == "cpu" and resolve_dtype(config.model.dtype, device) == torch.float32:
            print("preparing the CPU decode kernels meanwhile (built once per machine) ...", file=sys.stderr)
            build_in_background()  # a first build (20-60 s) overlaps the model's loading
        loaded = load_model(config.model, text_attention=register_attention())
        kernels_note = ""
        if loaded.device.type == "cpu":
            used = loaded.dtype == torch.float32 and kernels_ready()  # the kernels are fp32 only; waits for the build
            kernels_note = f", CPU kernels {'on' if used else 'off'}"
            tune_linear_layouts(loaded.model)  # the fastest one-row product per weight shape (README, decode)
        session = StreamingSession(loaded, config.cache, config.session)
    except (ModelLoadError, ValueError) as err:
        raise StartupError(str(err)) from err
    print(
        f"model ready: {loaded.family} on {loaded.device} ({str(loaded.dtype).removeprefix('torch.')}); "
        f"cache: {config.cache.policy}, budget {config.cache.budget}, window {config.cache.window}, "
        f"bias {config.cache.bias:g}, pool {config.cache.pool} ({config.cache.pool_mode}); "
        f"decode: {'compiled' if session.runner.decoder.compiled else 'eager'}" + kernels_note,
        file=sys.stderr,
        flush=True,
    )
    return loaded, session


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

    def watch_configured_source(self, config: AppConfig, loaded: LoadedModel) -> None:
        """Starts watching --video/--camera, resized for the model (SourceError if it cannot be opened)."""
        if config.capture is not None:
            self.assistant.watch(replace(config.capture, max_size=loaded.adapter.frame_size()))

    def close(self) -> None:
        stopped = self.assistant.stop()
        self.monitor.close()
        if self.log is not None:
            self.log.close()
        if not stopped:
            logger.warning("the model worker did not stop in time")


def build_assistant(
    config: AppConfig, session: StreamingSession, monitor: MemoryMonitor, displays: list[Subscriber]
) -> Running:
    """The assistant (not started yet), its event bus with `displays` and the --log-jsonl file subscribed."""
    bus = EventBus()
    for display in displays:
        bus.subscribe(display)
    log = JsonlLog(config.log_jsonl) if config.log_jsonl else None
    if log is not None:
        bus.subscribe(log)
    bus.publish(make_event("status", message=f"memory monitor: {monitor.backend} ({monitor.label})"))
    assistant = Assistant(session, config.schedule, bus, config.limits, memory_sample=memory_fields(monitor))
    return Running(assistant, bus, monitor, log)
