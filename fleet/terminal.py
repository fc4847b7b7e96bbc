"""`python -m app --ray ADDRESS ...`: the head's terminal. It joins the cluster, starts the coordinator (a host on
every box that offers one, the streams placed), and then works as the one-box terminal does: every stream's
answers and alerts printed (each line names its stream), questions typed (`NAME: question`, or a plain one for
all), `+NAME=SOURCE` / `-NAME`. The event log, MQTT, webhooks and the timeline run here, once for the fleet."""

from __future__ import annotations

import sys

from app.config import AppConfig, StreamConfig
from app.signals import StopRequested, run_stoppable
from app.startup import StartupError, fail
from app.streams import parse_stream_flag
from app.terminal import stream_remover
from bus.text_safety import printable
from capture.options import CaptureOptions
from fleet.coordinator import Coordinator
from fleet.head import start_head
from terminal.printer import TerminalPrinter
from terminal.stdin_questions import StdinQuestions
from terminal.watch_commands import refused_watches


def run_fleet(config: AppConfig) -> int:
    return run_stoppable(lambda signals: _run(config, signals), "the fleet started")


def _run(config: AppConfig, signals) -> int:
    printer = TerminalPrinter(show_clips=config.show_clips, prefix_streams=True)
    try:
        head = start_head(config, writers=[printer])
    except StartupError as err:
        return fail(str(err))
    coordinator = head.coordinator
    assert coordinator is not None
    print(f"streams: {coordinator.describe()}", file=sys.stderr, flush=True)
    print("type 'NAME: question' for one stream, a plain question for all", file=sys.stderr, flush=True)
    questions = StdinQuestions(
        coordinator.ask,
        stream_names=list(coordinator.streams),
        add=_adder(coordinator, config),
        remove=stream_remover(coordinator),
        max_chars=config.input_limits.max_question_chars,
        say=_say,
        watches=refused_watches(
            _say, "a fleet runs the watches of --alert and [alerts.NAME] only (not yet typed ones)"
        ),
    )
    questions.start()
    try:
        while not coordinator.done.wait(0.2):
            pass
    except StopRequested as stop:
        print(f"\n{stop.signal_name}: stopping the fleet ...", file=sys.stderr, flush=True)
    finally:
        signals.closing()
        questions.stop()
        head.close()
    return 0


def _say(message: str) -> None:
    print(printable(message), file=sys.stderr, flush=True)


def _adder(coordinator: Coordinator, config: AppConfig):
    """`+NAME=SOURCE`: the stream joins the fleet and is placed on a host with room (a status says which)."""
    options = CaptureOptions(policy=config.source_policy(), **config.capture_settings)

    def add(text: str) -> str | None:
        try:
            spec = parse_stream_flag(text)
            stream = StreamConfig(spec.name, options.config(spec.source), config.schedule)
            coordinator.add_stream(stream)
        except ValueError as err:
            print(printable(f"cannot add the stream (type +NAME=SOURCE): {err}"), file=sys.stderr, flush=True)
            return None
        print(printable(f"stream {spec.name} added: placing it on a host"), file=sys.stderr, flush=True)
        return spec.name

    return add
