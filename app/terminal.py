"""Terminal mode: open the source, load the model, watch and answer until the run ends or Ctrl-C."""

from __future__ import annotations

import sys

from app.config import AppConfig
from app.printer import TerminalPrinter
from app.signals import SignalStop, StopRequested, stop_on_signals
from app.startup import StartupError, build_assistant, fail, start_session
from app.stdin_questions import StdinQuestions
from capture import SourceError
from ui.memory_monitor import MemoryMonitor


def run_terminal(config: AppConfig) -> int:
    with stop_on_signals() as signals:
        try:
            return _run(config, signals)
        except StopRequested as stop:
            print(f"\n{stop.signal_name}: stopped before the run started", file=sys.stderr, flush=True)
            return 0


def _run(config: AppConfig, signals: SignalStop) -> int:
    try:
        loaded, streams, factory = start_session(config)
    except StartupError as err:
        return fail(str(err))
    names = [stream.name for stream in streams] if len(streams) > 1 else []
    printer = TerminalPrinter(show_clips=config.show_clips, prefix_streams=bool(names))
    try:
        running = build_assistant(config, streams, MemoryMonitor(), [printer], factory)
    except StartupError as err:
        return fail(str(err))
    try:
        running.watch_configured_sources(config, loaded)
    except SourceError as err:
        running.close()
        return fail(str(err))
    if names:
        print(
            f"streams: {', '.join(names)}; type 'NAME: question' for one stream, a plain question for all",
            file=sys.stderr,
        )
    questions = StdinQuestions(running.assistant.ask, stream_names=names)
    running.assistant.start()
    questions.start()
    try:
        while not running.assistant.done.wait(0.2):
            pass
    except StopRequested as stop:
        print(f"\n{stop.signal_name}: stopping ...", file=sys.stderr, flush=True)
    finally:
        signals.closing()
        questions.stop()
        running.close()
    return 0
