"""Terminal mode: open the source, load the model, watch and answer until the run ends or Ctrl-C."""

from __future__ import annotations

import sys

from app.config import AppConfig
from app.printer import TerminalPrinter
from app.startup import StartupError, build_assistant, fail, start_session
from app.stdin_questions import StdinQuestions
from capture import SourceError
from ui.memory_monitor import MemoryMonitor


def run_terminal(config: AppConfig) -> int:
    try:
        loaded, session = start_session(config)
    except StartupError as err:
        return fail(str(err))
    running = build_assistant(config, session, MemoryMonitor(), [TerminalPrinter(show_clips=config.show_clips)])
    try:
        running.watch_configured_source(config, loaded)
    except SourceError as err:
        running.close()
        return fail(str(err))
    questions = StdinQuestions(running.assistant.ask)
    running.assistant.start()
    questions.start()
    try:
        while not running.assistant.done.wait(0.2):
            pass
    except KeyboardInterrupt:
        print("\nstopping ...", file=sys.stderr, flush=True)
    finally:
        questions.stop()
        running.close()
    return 0
