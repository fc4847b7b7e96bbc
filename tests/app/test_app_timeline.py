"""The timeline through the app: every answer lands in the timeline (SQLite, and PostgreSQL: the tests taking
`timeline_location` run against both) and `python -m app history` finds it; a person's question gets earlier
moments as notes (cited as `timeline` evidence); bad files exit 2 and are never touched. The runs go through
`main` in this process (tests/support/in_process_main.py): what they check is the output and the files."""

import json
import sqlite3

from app.__main__ import main
from tests.support.app_helpers import of_type, read_log, video
from tests.support.in_process_main import run_app_here
from tests.support.timeline_backends import cli_args, is_postgres

COMMON = ("--model", "tiny", "--no-realtime", "--budget", "256", "--window", "16", "--max-new-tokens", "8",
          "--quiet")  # fmt: skip


def _history(*args, env=None):
    return run_app_here("history", *args, env=env)


def test_answers_land_in_the_timeline_history_finds_them_and_a_question_cites_them(tmp_path, timeline_location):
    """One run fills the timeline (every answer lands, `history` finds them); two later runs ask a person's
    question with and without the timeline's notes: only the first cites earlier moments."""
    timeline, log = timeline_location, tmp_path / "events.jsonl"
    where, env = cli_args(timeline)
    done = run_app_here("--stream", f"door={video(24)}", *COMMON, "--every", "8", *where, "--log-jsonl", str(log),
                   env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"timeline: {timeline}" in done.stderr
    if is_postgres(timeline):
        assert "timeline: postgresql://***@127.0.0.1:" in done.stderr  # the login is not shown
        assert timeline.password not in done.stderr + log.read_text()
    else:
        assert oct(timeline.stat().st_mode & 0o777) == "0o600"
        # a new SQLite timeline starts without "the last checkpoint failed: database table is locked" (issue 39)
        assert "checkpoint failed" not in done.stderr and "locked" not in done.stderr, done.stderr[-3000:]
        assert timeline.stat().st_size > 0
    found = _history("happening", "--since", "1d", *where, "--json", env=env)
    assert found.returncode == 0, found.stderr
    moments = [json.loads(line) for line in found.stdout.splitlines()]
    answers = [m for m in moments if m["kind"] == "answer"]
    assert sorted(m["end_s"] for m in answers) == [8.0, 16.0, 24.0]
    assert all(m["stream"] == "door" and m["who"] == "standing" for m in answers)
    said = {a.answer for a in of_type(read_log(log), "answer")}
    assert {m["text"] for m in answers} == said
    if not is_postgres(timeline):
        assert sqlite3.connect(timeline).execute("PRAGMA integrity_check").fetchone() == ("ok",)

    runs = {}
    for notes in ("--timeline-notes", "--no-timeline-notes"):
        log = tmp_path / f"{notes}.jsonl"
        done = run_app_here(
            "--stream", f"door={video(60)}", *COMMON, "--every", "0", "--max-rounds", "1", *where, notes,
            "--log-jsonl", str(log), stdin="What is happening now?\n", env=env,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        runs[notes] = of_type(read_log(log), "answer")
    with_notes, without = runs["--timeline-notes"], runs["--no-timeline-notes"]
    assert with_notes and with_notes[0].question == "What is happening now?"  # recorded as asked
    cited = [e for e in with_notes[0].evidence if e.source == "timeline"]
    assert cited and all(e.stream == "door" and e.row_id > 0 and e.end in (8.0, 16.0, 24.0) for e in cited)
    assert with_notes[0].stats.prefill_tokens > without[0].stats.prefill_tokens  # the notes were in the prompt
    assert not [e for e in without[0].evidence if e["source"] == "timeline"]


def test_an_unusable_timeline_exits_2_and_a_corrupt_one_is_left_as_it_was(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    assert main(["--video", str(video(8)), *COMMON, "--timeline", str(blocker / "timeline.sqlite")]) == 2
    err = capsys.readouterr().err
    assert "choose another --timeline" in err, err[-1500:]
    corrupt = tmp_path / "timeline.sqlite"
    corrupt.write_bytes(b"this is not a database" * 100)
    before = corrupt.read_bytes()
    assert main(["--video", str(video(8)), *COMMON, "--timeline", str(corrupt)]) == 2
    err = capsys.readouterr().err
    assert "move it aside" in err, err[-1500:]
    assert corrupt.read_bytes() == before
    assert "loading tiny" not in err  # refused before the model loads


def test_no_timeline_when_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGE_ASSISTANT_DATA", str(tmp_path))
    done = run_app_here("--video", str(video(8)), *COMMON, "--every", "4", "--timeline", "")
    assert done.returncode == 0, done.stderr[-1500:]
    assert "timeline:" not in done.stderr and not list(tmp_path.glob("*.sqlite"))
