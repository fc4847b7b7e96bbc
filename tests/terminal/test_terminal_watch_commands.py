"""Watches typed in the terminal (terminal/watch_commands.py): `watch for: QUESTION [every 5s] [on change] [once]
[for 10m] [threshold 0.7] [as NAME]`, `watches`, `unwatch NAME`; parsed, handed to the run's runtime watches
(owner "terminal"), answered on stderr; plain questions still asked. End to end: a watch typed into a real run
gives its alerts in the --log-jsonl and is kept in the runtime watches' file."""

import json
import os
import time

import pytest

from app.cli import build_parser
from terminal.stdin_questions import StdinQuestions
from terminal.watch_commands import USAGE, TerminalWatches, parse_watch, refused_watches
from tests.support.app_helpers import of_type, read_log, video
from tests.support.in_process_main import run_app_here
from tests.watches.test_watches_runtime import Clock, FakeAssistant
from watches.runtime import RuntimeWatches, WatchLimits, state_path
from watches.spec import WatchSpec

HANG_S = 60  # a guard against a hang, not a time the test expects


@pytest.mark.parametrize(
    ("line", "stream", "settings", "expires_in_s", "one_shot"),
    [
        ("watch for: Is it raining?", None, {"question": "Is it raining?", "streams": None}, None, False),
        (
            "Watch for:  is there a person at the door? every 5s once for 10m",
            "door",
            {"question": "is there a person at the door?", "streams": ["door"], "every": 5.0},
            600.0,
            True,
        ),
        (
            "watch for: Is the gate open? [every 2 min] [on change] [threshold 0.7] [as gate] [for 1.5h]",
            None,
            {
                "question": "Is the gate open?",
                "streams": None,
                "every": 120.0,
                "on_change": True,
                "threshold": 0.7,
                "name": "gate",
            },  # fmt: skip
            5400.0,
            False,
        ),
        (
            "watch for: Is someone waiting for a bus?",
            None,
            {"question": "Is someone waiting for a bus?", "streams": None},
            None,
            False,
        ),  # fmt: skip
    ],
)
def test_a_watch_line_is_parsed_into_settings(line, stream, settings, expires_in_s, one_shot):
    typed = parse_watch(line, stream)
    assert (typed.settings, typed.expires_in_s, typed.one_shot) == (settings, expires_in_s, one_shot)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("watch for:", "type the yes/no question after 'watch for:'"),
        ("watch for: every 5s once", "type the yes/no question after 'watch for:'"),
        ("watch for: Is it dark? once once", "once is given twice"),
        ("watch for: Is it dark? every 5s every 10s", "every is given twice"),
    ],
)
def test_a_bad_watch_line_says_the_form(line, expected):
    with pytest.raises(ValueError, match=expected) as err:
        parse_watch(line)
    assert USAGE in str(err.value)


def terminal(tmp_path, limits=None):
    said = []
    watches = RuntimeWatches(
        FakeAssistant(), [WatchSpec("smoke", "Is there smoke?")], state_path(tmp_path), limits, Clock()
    )
    return watches, said, TerminalWatches(watches, said.append)


def test_typed_watches_are_added_listed_and_ended_with_clear_messages(tmp_path):
    watches, said, typed = terminal(tmp_path)
    assert typed("watch for: Is the gate open? every 5s once as gate", "yard")
    watch = watches.get("gate")
    assert watch.owner == "terminal" and watch.one_shot and watch.spec.streams == ("yard",) and watch.spec.every == 5
    assert said[-1] == (
        "watching: gate: “Is the gate open?” on yard, every 5 s; ends at its first alert; set by terminal "
        "(type 'unwatch gate' to end it)"
    )
    assert typed("watches", None)
    assert said[-1].splitlines() == [
        "watches:",
        "  smoke: “Is there smoke?” (configured at start)",
        "  gate: “Is the gate open?” on yard, every 5 s; ends at its first alert; set by terminal",
    ]
    assert typed("unwatch gate", None) and said[-1] == "watch gate ended" and watches.list() == []
    assert json.loads(state_path(tmp_path).read_text())["watches"] == []


@pytest.mark.parametrize(
    ("line", "stream", "expected"),
    [
        ("watch for: Is it dark? as smoke", None, "cannot add the watch: a configured watch (--alert, [alerts.NAME])"),
        ("watch for: Is it dark?", "attic", "cannot add the watch: watch 'watch-"),
        ("watch for: Is it dark? every 0.5s", None, "every must be 1 to 86400 seconds of stream time"),
        ("watch for: Is it dark? threshold 2", None, "threshold must be between 0 and 1"),
        ("watch for: Is it dark? for 100d", None, "expires_in_s must be a number of seconds > 0"),
        ("watch for: " + "x" * 101, None, "the question is too long (101 characters"),
        ("unwatch", None, "cannot end the watch: type unwatch NAME"),
        ("unwatch nope", None, "cannot end the watch: no runtime watch named 'nope'"),
        ("unwatch smoke", None, "cannot end the watch: watch 'smoke' is configured at start"),
    ],
)
def test_a_refused_typed_watch_says_why_and_changes_nothing(tmp_path, line, stream, expected):
    watches, said, typed = terminal(tmp_path)
    assert typed(line, stream)
    assert expected in said[-1], said[-1]
    assert watches.list() == []


def test_the_terminals_watches_share_one_owners_limit(tmp_path):
    _, said, typed = terminal(tmp_path, WatchLimits(per_owner=1, total=10))
    typed("watch for: Is it dark?", None)
    typed("watch for: Is it light?", None)
    assert "cannot add the watch: terminal holds 1 watches already" in said[-1]
    assert not typed("Is anyone watching for me?", None) and not typed("watchesque", None)  # questions


def test_stdin_hands_watch_lines_to_the_watches_and_the_rest_to_questions():
    asked, handled = [], []

    def watches(line, stream):
        handled.append((line, stream))
        return line.startswith(("watch for:", "unwatch", "watches"))

    read, write = os.pipe()
    with os.fdopen(read) as stream, os.fdopen(write, "w") as typing:
        questions = StdinQuestions(
            lambda q, stream=None: asked.append((q, stream)), stream, 0.05, ["a", "b"], watches=watches
        )
        questions.start()
        typing.write("watch for: Is it dark? once\nb: watch for: Is the gate open?\nwatches\nunwatch x\nb: what now?\n")
        typing.flush()
        typing.close()
        deadline = time.monotonic() + HANG_S
        while not asked and time.monotonic() < deadline:
            time.sleep(0.05)
        questions.stop()
    assert handled[:4] == [
        ("watch for: Is it dark? once", None),
        ("watch for: Is the gate open?", "b"),  # NAME: routes a watch to that stream, as a question
        ("watches", None),
        ("unwatch x", None),
    ]
    assert asked == [("what now?", "b")]


def test_a_watch_typed_into_a_run_alerts_in_the_log_and_is_kept(tmp_path):
    # At real-time pace (16 s): the typed lines must reach the run while the video still plays; without pacing
    # the whole video could be over before the stdin thread hands them in, on a loaded machine.
    log, timeline = tmp_path / "run.jsonl", tmp_path / "data" / "timeline.sqlite"
    typed = (
        "watch for: Is there a person? every 2s threshold 0 once as person\n"
        "watch for: Is it dark? every 4s for 1h as dark\n"
        "watch for: Is it light? as dark\n"
        "watches\n"
        "what is on screen?\n"
    )
    done = run_app_here(
        "--video", str(video(16)), "--model", "tiny", "--every", "0", "--budget", "256", "--window", "16",
        "--max-new-tokens", "8", "--quiet", "--log-jsonl", str(log), "--timeline", str(timeline), stdin=typed,
        env={"EDGE_ASSISTANT_CPU_KERNELS": "0"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "watching: person: “Is there a person?” on all streams, every 2 s; ends at its first alert" in done.stderr
    assert "cannot add the watch: a watch named 'dark' exists already" in done.stderr
    assert "  dark: “Is it dark?” on all streams, every 4 s; ends at " in done.stderr  # the `watches` list
    events = read_log(log)
    person = [e for e in of_type(events, "alert") if e.alert == "person"]
    assert [e.state for e in person] == ["begin", "end"], person
    assert person[1].reason == "one-shot" and person[0].question == "Is there a person?"
    assert any(e.alert == "dark" for e in of_type(events, "check"))
    assert [a.question for a in of_type(events, "answer")] == ["what is on screen?"]  # plain questions still work
    kept = json.loads(state_path(timeline.parent).read_text())["watches"]  # as the API's: kept for the next run
    assert [(w["spec"]["name"], w["owner"]) for w in kept] == [("dark", "terminal")]


def test_help_says_how_to_type_watches():
    text = " ".join(build_parser().format_help().split())
    assert "'watch for: QUESTION [every 5s] [on change] [once] [for 10m] [threshold 0.7] [as NAME]'" in text
    assert "'watches' to list them, 'unwatch NAME' to end one" in text


def test_a_terminal_without_watches_refuses_watch_lines_and_lets_questions_through():
    said = []
    refuse = refused_watches(said.append, "a fleet runs configured watches only")
    assert refuse("watch for: Is it dark?", None) and refuse("watches", "a") and refuse("unwatch x", None)
    assert said == ["watches cannot be set here: a fleet runs configured watches only"] * 3
    assert not refuse("What is happening?", None) and len(said) == 3
