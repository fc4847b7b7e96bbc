"""`python -m app history --summary | --recap`: a period of the timeline from the terminal, run by main() in this
process, over rows written here (SQLite and PostgreSQL: the `timeline_location` fixture), so each number printed
is arithmetic on them; bad periods, misplaced flags and unknown names exit 2 saying why."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from app.__main__ import main
from tests.support.in_process_main import run_app_here
from tests.support.timeline_backends import cli_args
from timeline import TimelineConfig
from timeline.store import Row, TimelineStore

T0 = time.time() - 3600.0  # the rows: T0 + seconds; an hour ago


def alert(t: float, alert_id: str, state: str, duration: float | None = None, name: str = "person") -> Row:
    return Row(kind="alert", t_wall=T0 + t, stream="door", start_s=t, end_s=t, question=f"Is a {name} there?",
               text=f"{name} {state}", who="watch", alert=name, alert_id=alert_id, state=state,
               duration_s=duration)  # fmt: skip


def answer(t: float, text: str, who: str = "standing") -> Row:
    return Row(kind="answer", t_wall=T0 + t, stream="door", start_s=t - 4, end_s=t, question="What is there?",
               text=text, who=who, round=1)  # fmt: skip


ROWS = [
    alert(100, "p1", "begin"),
    alert(160, "p1", "end", 60.0),
    alert(300, "p2", "begin"),
    alert(310, "p2", "end", 10.0),
    alert(400, "c1", "begin", name="cat"),  # still on: 3200 s up to now
    answer(10, "An empty porch."),
    answer(20, "an empty porch"),
    answer(30, "A parcel.\x1b[2J\x1b]0;owned\x07", who="person"),
    Row(kind="stream", t_wall=T0 + 200, stream="yard", start_s=0, end_s=0, text="reconnect", state="reconnect"),
    Row(kind="stream", t_wall=T0 + 230, stream="yard", start_s=0, end_s=0, text="back", state="reconnected"),
]


@pytest.fixture
def timeline(timeline_location):
    store = TimelineStore(TimelineConfig(timeline_location))
    store.write(ROWS)
    store.close()
    return timeline_location


def history_of(location, *args: str) -> subprocess.CompletedProcess:
    timeline, env = cli_args(location)
    return run_app_here("history", *args, *timeline, env=env)


def history_in_process(capsys, *args: str) -> tuple[int, str, str]:
    try:
        code = main(["history", *args])
    except SystemExit as exited:
        code = exited.code
    out, err = capsys.readouterr()
    return code, out, err


def test_the_summary_says_how_many_times_and_how_long(timeline):
    result = history_of(timeline, "--summary", "--since", "2h")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("From ") and lines[0].endswith("(local time):")
    [person] = [line for line in lines if line.startswith("watch person on door:")]
    assert "began 2 time(s), on 00:01:10 in all (longest 00:01:00)" in person and "on now" not in person
    first, last = (time.strftime("%H:%M:%S", time.localtime(T0 + t)) for t in (100, 300))
    assert f"first {first}, last {last}" in person
    [cat] = [line for line in lines if line.startswith("watch cat on door:")]
    assert "began 1 time(s)" in cat and cat.endswith(", on now")
    assert "stream door: 3 answer(s), 3 alert(s) begun, down 00:00:00" in lines
    [yard] = [line for line in lines if line.startswith("stream yard:")]
    assert "down 00:00:30 in 1 gap(s)" in yard and "(reconnect)" in yard


def test_the_summary_as_one_json_object_of_one_watch_per_hour(timeline):
    result = history_of(timeline, "--summary", "--json", "--watch", "person", "--bucket", "hour", "--since", "2h")
    assert result.returncode == 0, result.stderr
    [line] = result.stdout.splitlines()
    body = json.loads(line)
    assert body["bucket"] == "hour" and body["streams"] == []
    [person] = body["watches"]
    assert (person["began"], person["on_s"], person["longest_s"]) == (2, 70.0, 60.0)
    assert sum(b["began"] for b in person["buckets"]) == 2 and len(person["buckets"]) in (2, 3)


def test_until_ends_the_period(timeline):
    until = f"{T0 + 200:.0f}"
    body = json.loads(history_of(timeline, "--summary", "--json", "--since", "2h", "--until", until).stdout)
    assert [w["watch"] for w in body["watches"]] == ["person"]  # p2 and the cat began after
    assert body["watches"][0]["began"] == 1 and body["until"] == float(until)


def test_the_recap_prints_its_lines_without_what_a_terminal_would_act_on(timeline):
    result = history_of(timeline, "--recap", "--since", "2h", "--stream", "door")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("From ") and "3 alert(s), 3 answer(s), 0 gap(s) in 5 line(s)" in lines[0]
    assert lines[1].endswith("door: an empty porch (x2)")  # a run shows its last answer
    assert lines[2].endswith("door: A parcel.")
    assert "person: on for 1 min 0 s" in lines[3] and "cat: on since it began" in lines[5]
    assert not any(ch in result.stdout for ch in "\x1b\x07"), repr(result.stdout)
    as_json = history_of(timeline, "--recap", "--json", "--since", "2h", "--stream", "door")
    assert not any(ch in as_json.stdout for ch in "\x1b\x07")
    body = json.loads(as_json.stdout)
    assert body["lines"][1]["text"] == "A parcel.\x1b[2J\x1b]0;owned\x07"  # kept as stored, escaped in the JSON
    assert [line["kind"] for line in body["lines"]] == ["answers", "asked", "alert", "alert", "alert"]


def test_an_empty_period_says_so(timeline):
    result = history_of(timeline, "--recap", "--since", "1d", "--until", "2h")
    assert result.returncode == 0 and result.stdout.startswith("Nothing in the timeline from ")
    summary = history_of(timeline, "--summary", "--since", "1d", "--until", "2h")
    assert summary.returncode == 0 and summary.stdout.rstrip().endswith(": no alert, no answer, no gap.")


def test_unknown_names_exit_2_naming_those_there_are(timeline):
    stream = history_of(timeline, "--summary", "--stream", "garage")
    assert stream.returncode == 2
    assert "no stream named 'garage' in the timeline; streams: door, yard" in stream.stderr
    watch = history_of(timeline, "--recap", "--watch", "fox")
    assert watch.returncode == 2 and "no watch named 'fox' in the timeline; watches: cat, person" in watch.stderr
    on_yard = history_of(timeline, "--recap", "--stream", "yard", "--watch", "person")
    assert on_yard.returncode == 2 and "of stream 'yard' in the timeline; watches: none" in on_yard.stderr
    known = history_of(timeline, "--summary", "--stream", "yard", "--since", "10m")  # seen: nothing happened
    assert known.returncode == 0, known.stderr


def test_more_hours_than_a_month_are_asked_per_day(timeline):
    hours = history_of(timeline, "--summary", "--since", "40d", "--bucket", "hour")
    assert hours.returncode == 2 and "more than 798 hours: ask per day" in hours.stderr and hours.stdout == ""
    days = history_of(timeline, "--summary", "--since", "40d", "--bucket", "day")
    assert days.returncode == 0, days.stderr


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--summary", "--until", "tomorrow"], "--until: invalid time 'tomorrow': expected an age"),
        (["--recap", "--since", "1h", "--until", "2h"], "the period ends before it starts"),
        (["--summary", "--since", "2x"], "invalid --since '2x'"),
        (["--summary", "--bucket", "week"], "invalid choice: 'week'"),
        (["--recap", "--bucket", "hour"], "--bucket: only with --summary"),
        (["--until", "1h"], "--until: only with --summary or --recap"),
        (["--watch", "fox", "van"], "--watch: only with --summary or --recap"),
        (["--bucket", "day"], "--bucket: only with --summary or --recap"),
        (["--summary", "van"], "TEXT searches the moments; --summary and --recap read a period"),
        (["--summary", "--recap"], "not allowed with argument"),
    ],
)
def test_bad_periods_and_misplaced_flags_exit_2_saying_why(tmp_path, capsys, args, words):
    code, out, err = history_in_process(capsys, *args, "--timeline", str(tmp_path / "t.sqlite"))
    assert code == 2 and out == ""
    assert words in err
    assert not (tmp_path / "t.sqlite").exists()


def test_a_missing_timeline_exits_2_without_creating_one(tmp_path, capsys):
    code, _, err = history_in_process(capsys, "--summary", "--timeline", str(tmp_path / "none.sqlite"))
    assert code == 2 and err.startswith("error: ") and not (tmp_path / "none.sqlite").exists()


def test_help_names_the_period_flags(capsys):
    code, out, _ = history_in_process(capsys, "--help")
    assert code == 0
    for flag in ("--summary", "--recap", "--until TIME", "--watch NAME", "--bucket {hour,day}", "ISO 8601"):
        assert flag in out, flag
