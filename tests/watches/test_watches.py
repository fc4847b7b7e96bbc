"""Yes/no watches: the begin/end state machine on sequences, their configuration, and `python -m app --alert`
end to end (checks on schedule, alerts with ids and snapshots, answers unchanged by the checks)."""

import sqlite3

import pytest

from app.__main__ import main
from app.runtime_watch_apply import STOPPED
from bus import StatusKind
from tests.support.app_helpers import of_type, read_log, video
from tests.support.in_process_main import run_app_here
from watches.spec import WatchSpec, check_streams, parse_alert_flag, specs_from_table
from watches.state import WatchState


def run(sequence, threshold=0.5, on_after=2, off_after=2, cooldown=0.0, every=10.0):
    """The transitions of a sequence of p_yes values checked every `every` stream seconds: (state, time, dur)."""
    state = WatchState("door-person", threshold, on_after, off_after, cooldown)
    out = []
    for k, p in enumerate(sequence):
        change = state.update(p, every * (k + 1), 1000.0 + k)
        if change is not None:
            out.append((change.state, change.stream_time, change.duration_s, change.id))
    return out


def test_an_alert_begins_after_on_after_yes_and_ends_after_off_after_no():
    changes = run([0.1, 0.9, 0.8, 0.7, 0.2, 0.9, 0.1, 0.1, 0.1])
    assert [(s, t, d) for s, t, d, _ in changes] == [("begin", 30.0, None), ("end", 80.0, 50.0)]
    assert changes[0][3] == changes[1][3] == "door-person-1002000"  # the end repeats its begin's id


def test_isolated_checks_do_not_flap():
    assert run([0.9, 0.1, 0.9, 0.1, 0.9, 0.1]) == []  # never two yes in a row
    once_on = run([0.9, 0.9, 0.1, 0.9, 0.1, 0.9])  # never two no in a row once on
    assert [s for s, *_ in once_on] == ["begin"]


def test_the_threshold_counts_at_or_above():
    assert [s for s, *_ in run([0.5, 0.5], threshold=0.5)] == ["begin"]
    assert run([0.49, 0.49], threshold=0.5) == []
    assert [s for s, *_ in run([0.3], threshold=0.0, on_after=1)] == ["begin"]


def test_no_new_alert_begins_during_the_cooldown():
    yes_no = [0.9, 0.9, 0.1, 0.1]  # begins at 20, ends at 40
    changes = run(yes_no + [0.9] * 6, cooldown=25.0)
    assert [(s, t) for s, t, *_ in changes] == [("begin", 20.0), ("end", 40.0), ("begin", 70.0)]
    assert [(s, t) for s, t, *_ in run(yes_no + [0.9] * 6)][2] == ("begin", 60.0)  # no cooldown: at once


def test_specs_from_flags_and_tables_with_clear_errors():
    assert parse_alert_flag("person=Is there a person?") == WatchSpec("person", "Is there a person?")
    specs = specs_from_table({"gate": {"question": "Is the gate open?", "streams": ["yard"], "threshold": 0.7}})
    assert specs == [WatchSpec("gate", "Is the gate open?", streams=("yard",), threshold=0.7)]
    assert not specs[0].watches("door") and specs[0].watches("yard")
    bad = [
        ("Person=Is it?", "lowercase letters"),
        ("person", 'NAME="QUESTION"'),
    ]
    for text, message in bad:
        with pytest.raises(ValueError, match=message):
            parse_alert_flag(text)
    for settings, message in [
        ({"question": "q", "threshold": 1.5}, "between 0 and 1"),
        ({"question": "q", "on_after": 0}, "on_after"),
        ({"question": "q", "every": 0}, "every"),
        ({"question": "q", "cooldown": -1}, "cooldown"),
        ({"question": "q", "colour": "red"}, "allowed: question, streams"),
        ({"threshold": 0.5}, "question"),
    ]:
        with pytest.raises(ValueError, match=message):
            specs_from_table({"gate": settings})
    with pytest.raises(ValueError, match="unknown stream"):
        check_streams(specs, ["door"])
    with pytest.raises(ValueError, match="twice"):
        check_streams([WatchSpec("a", "q"), WatchSpec("a", "r")], ["door"])


def test_bad_alerts_exit_2_naming_what_is_allowed(tmp_path, capsys):
    config = tmp_path / "alerts.toml"
    config.write_text('[alerts.gate]\nquestion = "Is the gate open?"\nstreams = ["yard"]\n')
    with pytest.raises(SystemExit) as exited:
        main(["--video", str(video(8)), "--model", "tiny", "--timeline", "", "--config", str(config)])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "unknown stream(s) yard" in err, err[-1500:]
    with pytest.raises(SystemExit) as exited:
        main(["--video", str(video(8)), "--model", "tiny", "--timeline", "", "--alert", "Bad Name=Is it?"])
    assert exited.value.code == 2 and "lowercase letters" in capsys.readouterr().err


COMMON = ("--model", "tiny", "--no-realtime", "--every", "8", "--budget", "256", "--window", "16",
          "--max-new-tokens", "8", "--quiet")  # fmt: skip


@pytest.fixture(scope="module")
def watched(tmp_path_factory):
    folder = tmp_path_factory.mktemp("watches")
    config = folder / "alerts.toml"
    config.write_text(
        '[alerts.always]\nquestion = "Is anything there?"\nthreshold = 0.0\nevery = 8\n'
        '[alerts.never]\nquestion = "Is a dragon there?"\nthreshold = 1.0\non_after = 1\n'
    )
    with_watches, without = folder / "with.jsonl", folder / "without.jsonl"
    source = str(video(40))
    done = run_app_here(
        "--video", source, *COMMON, "--config", str(config), "--log-jsonl", str(with_watches),
        "--timeline", str(folder / "timeline.sqlite"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    plain = run_app_here("--video", source, *COMMON, "--log-jsonl", str(without))
    assert plain.returncode == 0, plain.stderr[-2000:]
    return done, read_log(with_watches), read_log(without), with_watches


def test_checks_run_on_their_schedule_and_alerts_begin_with_a_snapshot(watched):
    done, events, _, log = watched
    checks = of_type(events, "check")
    assert [c.stream_time for c in checks if c.alert == "always"] == [8.0, 16.0, 24.0, 32.0, 40.0]
    # every 10 s by default, at the first clip end (4 s clips) past each multiple of 10
    assert [c.stream_time for c in checks if c.alert == "never"] == [12.0, 20.0, 32.0, 40.0]
    assert all(0.0 <= c.p_yes <= 1.0 and c.ms > 0 for c in checks)
    alerts = of_type(events, "alert")
    assert [(a.alert, a.state, a.stream_time) for a in alerts] == [("always", "begin", 16.0), ("always", "end", 40.0)]
    assert alerts[0].snapshot_bytes > 0 and '"snapshot":' not in log.read_text()  # the JPEG stays out of the log
    assert alerts[0].id.startswith(f"{alerts[0].stream}-always-")
    assert "ALERT always began at t=16.0s" in done.stdout


def test_an_alert_on_when_the_assistant_stops_ends_once_in_the_log_and_the_timeline(watched):
    """The video ends with the always-on alert on: it gets its end (no check will end it), once, with the reason,
    before the outputs close: the log and the timeline have it closed (issue 50)."""
    done, events, _, log = watched
    begin, end = of_type(events, "alert")
    assert (end.state, end.id, end.reason, end.duration_s) == ("end", begin.id, STOPPED, 24.0)
    stopped = next(i for i, e in enumerate(events) if e.TYPE == "status" and e.kind == StatusKind.STOPPED)
    assert events.index(end) < stopped  # before the assistant's last event
    assert "alert always ended at t=40.0s after 24.0s (assistant stopped)" in done.stdout
    rows = sqlite3.connect(log.parent / "timeline.sqlite").execute(
        "SELECT state, start_s, end_s, text FROM moments WHERE kind = 'alert' AND alert_id = ? ORDER BY id", (begin.id,)
    )
    assert rows.fetchall() == [
        ("begin", 16.0, 16.0, "always began"),
        ("end", 16.0, 40.0, f"always ended after 24 s ({STOPPED})"),
    ]


def test_checks_leave_the_answers_as_they_were(watched):
    _, with_watches, without, _ = watched
    answers = [(a.stream_time, a.answer) for a in of_type(with_watches, "answer")]
    assert answers and answers == [(a.stream_time, a.answer) for a in of_type(without, "answer")]
    clip_cache = [c.stats.cache_tokens for c in of_type(with_watches, "clip")]
    assert clip_cache == [c.stats.cache_tokens for c in of_type(without, "clip")]
