"""Terminal mode (one box, or with --ray the fleet's head): start the assistant (app/launch.py), watch and answer
until the run ends or Ctrl-C: every stream's answers and alerts printed, questions typed (`NAME: question`, or a
plain one for all), `+NAME=SOURCE` / `-NAME`, and the watch commands (terminal/watch_commands.py)."""

from __future__ import annotations

import sys
from collections.abc import Callable

from app.config import AppConfig
from app.launch import ONE_BOX, Feeds, Launcher
from app.signals import SignalStop, StopRequested, run_stoppable
from app.startup import StartupError, fail
from app.streams import parse_stream_flag
from bus.desk import Desk
from bus.text_safety import printable
from capture import SourceError
from capture.options import CaptureOptions
from terminal.printer import TerminalPrinter
from terminal.stdin_questions import StdinQuestions
from terminal.watch_commands import TerminalWatches


def run_terminal(config: AppConfig, launcher: Launcher = ONE_BOX) -> int:
    return run_stoppable(lambda signals: _run(config, launcher, signals), "the run started")


def _run(config: AppConfig, launcher: Launcher, signals: SignalStop) -> int:
    # a fleet's lines always name their stream (its hosts' lines arrive interleaved)
    several = len(config.streams) > 1 or config.fleet is not None
    printer = TerminalPrinter(show_clips=config.show_clips, prefix_streams=several)
    try:
        launched = launcher.start(config, Feeds(writers=[printer]))
    except StartupError as err:
        return fail(str(err))
    try:
        launched.begin()
    except SourceError as err:
        launched.close()
        return fail(str(err))
    names = list(launched.desk.desk_streams())  # one box without --stream: its default one
    hint = "type 'NAME: question' for one stream, a plain question for all"
    if launched.streams:  # a fleet: where each stream runs
        print(f"streams: {launched.streams}\n{hint}", file=sys.stderr, flush=True)
    elif len(names) > 1:
        print(f"streams: {', '.join(names)}; {hint}", file=sys.stderr, flush=True)
    desk = launched.desk
    questions = StdinQuestions(
        desk.ask,
        stream_names=names,
        add=stream_adder(desk, launched.options, printer),
        remove=stream_remover(desk),
        max_chars=config.input_limits.max_question_chars,
        say=_say,
        watches=None if launched.watches is None else TerminalWatches(launched.watches, _say),
    )
    questions.start()
    try:
        while not launched.done.wait(0.2):
            pass
    except StopRequested as stop:
        print(f"\n{stop.signal_name}: stopping ...", file=sys.stderr, flush=True)
    finally:
        signals.closing()
        questions.stop()
        launched.close()
    return 0


def _say(message: str) -> None:
    print(printable(message), file=sys.stderr, flush=True)


def stream_adder(desk: Desk, options: CaptureOptions, printer: TerminalPrinter) -> Callable[[str], str | None]:
    """What a typed `+NAME=SOURCE` line does: adds that stream, captured like those of the command line, if the
    source policy allows it (capture.policy: rtsp/http(s) URLs, cameras configured at start; a fleet: network
    streams only), and says so (or why not) on stderr; returns its name, or None when refused."""

    def add(text: str) -> str | None:
        try:
            spec = parse_stream_flag(text)
            capture = options.config(spec.source)
            admission = desk.add_stream(spec.name, capture)
        except (SourceError, ValueError) as err:
            print(printable(f"cannot add the stream (type +NAME=SOURCE): {err}"), file=sys.stderr, flush=True)
            return None
        printer.prefix_streams = True  # from now on several streams: every line names its own
        print(printable(f"stream {spec.name} added; memory: {admission}"), file=sys.stderr, flush=True)
        return spec.name

    return add


def stream_remover(desk: Desk) -> Callable[[str], bool]:
    """What a typed `-NAME` line does: removes that stream and says so (or why not) on stderr; returns whether it
    was removed."""

    def remove(name: str) -> bool:
        try:
            desk.remove_stream(name)
        except ValueError as err:
            print(f"cannot remove the stream (type -NAME): {err}", file=sys.stderr, flush=True)
            return False
        print(f"stream {name} removed", file=sys.stderr, flush=True)
        return True

    return remove
