"""`python -m app history`: the timeline searched from the terminal (the `timeline` fixture: SQLite and
PostgreSQL)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from app.__main__ import main
from bus.clock import clock
from terminal.history import parse_since
from tests.support.in_process_main import run_app_here
from tests.support.timeline_backends import cli_args
from timeline import TimelineConfig, default_timeline_path
from timeline.store import Row, TimelineStore

REPO = Path(__file__).resolve().parents[2]


def history(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """`python -m app history ARGS`, run by main() in this process (tests/support/in_process_main.py)."""
    return run_app_here("history", *args, env=env)


def history_of(location, *args: str) -> subprocess.CompletedProcess:
    """`history ARGS --timeline LOCATION` (a PostgreSQL password through the environment)."""
    timeline, env = cli_args(location)
    return history(*args, *timeline, env=env)


@pytest.fixture
def timeline(timeline_location):
    path = timeline_location
    now = time.time()
    store = TimelineStore(TimelineConfig(path))
    store.write(
        [
            Row("answer", now - 3 * 86400, "door", 5.0, 9.0, "Is a truck there?", "An old truck.", "standing"),
            Row(
                "answer",
                now - 600,
                "door",
                760.0,
                764.0,
                "Is a truck there?",
                "Yes, a red truck.",
                "person",
                thumbnail=b"jpeg",
            ),  # fmt: skip
            Row(
                "alert",
                now - 300,
                "yard",
                800.0,
                800.0,
                "Is a fox visible?",
                "fox began",
                "watch",
                p_yes=0.91,
                alert="fox",
                state="begin",
            ),  # fmt: skip
        ]
    )
    store.close()
    return path


def test_prints_the_matching_moment(timeline):
    result = history_of(timeline, "truck", "--since", "1d")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1  # the 3-day-old truck is older than --since
    assert "door" in lines[0] and "00:12:40-00:12:44" in lines[0] and "person" in lines[0]
    assert "Q: Is a truck there? A: Yes, a red truck." in lines[0]


def test_json_lines_parse(timeline):
    result = history_of(timeline, "--json", "--stream", "yard")
    assert result.returncode == 0, result.stderr
    (moment,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert moment["kind"] == "alert" and moment["alert"] == "fox" and moment["who"] == "watch"
    assert moment["p_yes"] == 0.91 and moment["has_thumbnail"] is False


def history_in_process(capsys, *args: str) -> tuple[int, str, str]:
    """`python -m app history ARGS` run through the program's `main` in this process: (exit code, stdout, stderr).
    A bad flag exits through argparse (SystemExit); a timeline that cannot be read returns its code."""
    try:
        code = main(["history", *args])
    except SystemExit as exited:
        code = exited.code
    out, err = capsys.readouterr()
    return code, out, err


def test_missing_file_exits_2_without_creating_one(tmp_path, capsys):
    path = tmp_path / "nothing-here.sqlite"
    code, _, err = history_in_process(capsys, "truck", "--timeline", str(path))
    assert code == 2
    assert "no timeline at" in err and str(path) in err
    assert not path.exists()


def test_corrupt_file_exits_2_with_advice(tmp_path, capsys):
    path = tmp_path / "timeline.sqlite"
    path.write_bytes(b"not a database at all" * 100)
    code, _, err = history_in_process(capsys, "truck", "--timeline", str(path))
    assert code == 2 and "move it aside" in err


@pytest.mark.parametrize("since", ["2x", "yesterday", "-1h", "0m", "1.5"])
def test_bad_since_exits_2_naming_the_forms(tmp_path, capsys, since):
    code, _, err = history_in_process(capsys, "truck", f"--since={since}", "--timeline", str(tmp_path / "t.sqlite"))
    assert code == 2
    assert "90s, 30m, 2h, 1d" in err


def test_other_arguments_still_reach_the_assistant_cli(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0 and "--video" in capsys.readouterr().out


def test_parse_since_and_clock():
    assert parse_since("90s") == 90 and parse_since("30m") == 1800 and parse_since("2h") == 7200
    assert parse_since("1d") == 86400 and parse_since("1.5h") == 5400
    with pytest.raises(ValueError, match="90s, 30m, 2h, 1d"):
        parse_since("2 hours")
    assert clock(760.9) == "00:12:40" and clock(90061) == "25:01:01" and clock(None) == "--:--:--"


def test_default_path_follows_the_data_folder(monkeypatch, tmp_path):
    monkeypatch.setenv("EDGE_ASSISTANT_DATA", str(tmp_path))
    assert default_timeline_path() == tmp_path / "timeline.sqlite"
    monkeypatch.delenv("EDGE_ASSISTANT_DATA")
    assert default_timeline_path() == Path.home() / ".cache" / "edge-stream-assistant" / "timeline.sqlite"


def test_stored_escape_sequences_never_reach_the_terminal(timeline_location):
    hostile = (
        "A: \x1b]0;owned\x07\x1b[2J\x1b[31mred\x1b[0m \x9b1;1H"
        "\x1b]8;;http://x.example/\x1b\\link\x1b]8;;\x1b\\ ok\x08\x7f"
    )
    path = timeline_location
    store = TimelineStore(TimelineConfig(path))
    store.write([Row("answer", time.time(), "door", 1.0, 2.0, "what\x1b[1A?", hostile, "person")])
    store.close()
    result = history_of(path)
    assert result.returncode == 0, result.stderr
    assert not any(ch in result.stdout for ch in "\x1b\x9b\x07\x08\x7f"), repr(result.stdout)
    assert "red" in result.stdout and "link ok" in result.stdout and "what?" in result.stdout
    as_json = history_of(path, "--json")
    assert not any(ch in as_json.stdout for ch in "\x1b\x9b\x07\x08\x7f"), repr(as_json.stdout)
    assert json.loads(as_json.stdout)["text"] == hostile  # the data itself is kept, escaped
