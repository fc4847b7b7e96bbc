"""Terminal mode: open the source, load the model, watch and answer until the run ends or Ctrl-C."""

from __future__ import annotations

import logging
import sys
from dataclasses import replace

from app.assistant import Assistant
from app.config import AppConfig
from app.events import EventBus, JsonlLog, make_event
from app.printer import TerminalPrinter
from app.stdin_questions import StdinQuestions
from cache.attention import register_attention
from capture import SourceError, open_source
from model.loading import ModelLoadError, load_model
from model.session import StreamingSession
from ui.memory_monitor import MemoryMonitor

logger = logging.getLogger(__name__)

EXIT_BAD_INPUT = 2


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def probe_source(config: AppConfig) -> None:
    """Opens and closes the source once, so a bad one fails before the model loads (SourceError)."""
    source = open_source(config.capture)
    source.close()


def memory_fields(monitor: MemoryMonitor):
    """Extra answer-event fields from the memory monitor."""

    def sample() -> dict:
        s = monitor.sample()
        return {
            "memory_backend": s.backend,
            "memory_label": s.label,
            "device_used_bytes": s.device_used_bytes,
            "device_total_bytes": s.device_total_bytes,
        }

    return sample


def run_terminal(config: AppConfig) -> int:
    try:
        probe_source(config)
    except SourceError as err:
        return _fail(str(err))
    print(f"loading {config.model.model} ...", file=sys.stderr, flush=True)
    try:
        loaded = load_model(config.model, text_attention=register_attention())
        session = StreamingSession(loaded, config.cache, config.session)
    except ModelLoadError as err:
        return _fail(str(err))
    except ValueError as err:
        return _fail(str(err))
    print(
        f"model ready: {loaded.family} on {loaded.device} ({str(loaded.dtype).removeprefix('torch.')}); "
        f"cache: {config.cache.policy}, budget {config.cache.budget}, window {config.cache.window}, "
        f"bias {config.cache.bias:g}",
        file=sys.stderr,
        flush=True,
    )
    bus = EventBus()
    bus.subscribe(TerminalPrinter(show_clips=config.show_clips))
    log = JsonlLog(config.log_jsonl) if config.log_jsonl else None
    if log is not None:
        bus.subscribe(log)
    monitor = MemoryMonitor()
    bus.publish(make_event("status", message=f"memory monitor: {monitor.backend}"))
    assistant = Assistant(session, config.schedule, bus, config.limits, memory_sample=memory_fields(monitor))
    capture = replace(config.capture, max_size=loaded.adapter.frame_size())
    questions = StdinQuestions(assistant.ask)
    try:
        assistant.watch(capture)
    except SourceError as err:
        return _fail(str(err))
    assistant.start()
    questions.start()
    try:
        while not assistant.done.wait(0.2):
            pass
    except KeyboardInterrupt:
        print("\nstopping ...", file=sys.stderr, flush=True)
    finally:
        questions.stop()
        stopped = assistant.stop()
        monitor.close()
        if log is not None:
            log.close()
    if not stopped:
        logger.warning("the model worker did not stop in time")
    return 0
