"""Terminal mode: open the source, load the model, watch and answer until the run ends or Ctrl-C."""

from __future__ import annotations

import logging
import sys
from dataclasses import replace

from app.assistant import Assistant
from app.config import AppConfig
from app.events import EventBus, JsonlLog, make_event
from app.printer import TerminalPrinter
from app.startup import StartupError, fail, memory_fields, start_session
from app.stdin_questions import StdinQuestions
from capture import SourceError
from ui.memory_monitor import MemoryMonitor

logger = logging.getLogger(__name__)


def run_terminal(config: AppConfig) -> int:
    try:
        loaded, session = start_session(config)
    except StartupError as err:
        return fail(str(err))
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
        return fail(str(err))
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
