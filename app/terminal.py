"""Terminal mode: open the source, load the model, watch and answer until the run ends or Ctrl-C."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Protocol

from app.assistant import Assistant
from app.config import AppConfig
from app.signals import SignalStop, StopRequested, run_stoppable
from app.startup import StartupError, build_assistant, fail, start_session
from app.streams import parse_stream_flag
from bus.text_safety import printable
from capture import SourceError
from capture.options import CaptureOptions
from monitor.memory_monitor import MemoryMonitor
from terminal.printer import TerminalPrinter
from terminal.stdin_questions import StdinQuestions
from terminal.watch_commands import TerminalWatches


class StreamRemover(Protocol):
    def remove_stream(self, name: str) -> None: ...


def run_terminal(config: AppConfig) -> int:
    return run_stoppable(lambda signals: _run(config, signals), "the run started")


def _run(config: AppConfig, signals: SignalStop) -> int:
    try:
        loaded, streams, factory = start_session(config)
    except StartupError as err:
        return fail(str(err))
    names = [stream.name for stream in streams]
    printer = TerminalPrinter(show_clips=config.show_clips, prefix_streams=len(names) > 1)
    try:
        running = build_assistant(config, streams, MemoryMonitor(), [], factory, writers=[printer])
    except StartupError as err:
        return fail(str(err))
    try:
        running.watch_configured_sources(config, loaded)
    except SourceError as err:
        running.close()
        return fail(str(err))
    if len(names) > 1:
        print(
            f"streams: {', '.join(names)}; type 'NAME: question' for one stream, a plain question for all",
            file=sys.stderr,
        )
    add = stream_adder(running.assistant, config, loaded.adapter.frame_size(), printer)
    remove = stream_remover(running.assistant)
    questions = StdinQuestions(
        running.assistant.ask,
        stream_names=names,
        add=add,
        remove=remove,
        max_chars=config.input_limits.max_question_chars,
        say=_say,
        watches=None if running.watches is None else TerminalWatches(running.watches, _say),
    )
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


def _say(message: str) -> None:
    print(printable(message), file=sys.stderr, flush=True)


def stream_adder(
    assistant: Assistant, config: AppConfig, frame_size: tuple[int, int], printer: TerminalPrinter
) -> Callable[[str], str | None]:
    """What a typed `+NAME=SOURCE` line does: adds that stream, captured like those of the command line, if the
    source policy allows it (capture.policy: rtsp/http(s) URLs, cameras configured at start), and says so (or why
    not) on stderr; returns its name, or None when refused."""
    options = CaptureOptions(max_size=frame_size, policy=config.source_policy(), **config.capture_settings)

    def add(text: str) -> str | None:
        try:
            spec = parse_stream_flag(text)
            capture = options.config(spec.source)
            admission = assistant.add_stream(spec.name, capture)
        except (SourceError, ValueError) as err:
            print(printable(f"cannot add the stream (type +NAME=SOURCE): {err}"), file=sys.stderr, flush=True)
            return None
        printer.prefix_streams = True  # from now on several streams: every line names its own
        print(printable(f"stream {spec.name} added; memory: {admission}"), file=sys.stderr, flush=True)
        return spec.name

    return add


def stream_remover(assistant: Assistant | StreamRemover) -> Callable[[str], bool]:
    """What a typed `-NAME` line does: removes that stream (from this assistant, or the fleet's coordinator) and
    says so (or why not) on stderr; returns whether it was removed."""

    def remove(name: str) -> bool:
        try:
            assistant.remove_stream(name)
        except ValueError as err:
            print(f"cannot remove the stream (type -NAME): {err}", file=sys.stderr, flush=True)
            return False
        print(f"stream {name} removed", file=sys.stderr, flush=True)
        return True

    return remove
