"""What the assistant writes stays private: the event log 0600, the timeline 0600 in a 0700 folder, also when
they existed with looser modes (made private when they are the assistant's own; a shared folder only warned
about). A redacted event never holds a login."""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path

import pytest

from bus import to_record
from bus.redact import redacted
from outputs.event_log import JsonlLog
from tests.support.event_helpers import make_event
from timeline import TimelineConfig
from timeline.store import TimelineStore


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_an_existing_timeline_folder_of_its_own_is_made_0700(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    (folder / "timeline.sqlite-wal").write_bytes(b"")  # only the timeline's own files inside
    TimelineStore(TimelineConfig(folder / "timeline.sqlite")).close()
    assert mode(folder) == 0o700
    assert mode(folder / "timeline.sqlite") == 0o600


def test_the_data_folder_is_made_0700_although_it_holds_other_files(tmp_path, monkeypatch):
    monkeypatch.setenv("EDGE_ASSISTANT_DATA", str(tmp_path / "data"))
    folder = tmp_path / "data"
    folder.mkdir()
    folder.chmod(0o755)
    (folder / "kernels").mkdir()
    TimelineStore(TimelineConfig(folder / "timeline.sqlite")).close()
    assert mode(folder) == 0o700


def test_a_shared_folder_is_left_alone_with_a_warning_and_the_file_made_0600(tmp_path, caplog):
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o755)
    (folder / "notes.txt").write_text("someone else's")
    path = folder / "timeline.sqlite"
    path.touch()
    path.chmod(0o644)
    with caplog.at_level(logging.WARNING):
        TimelineStore(TimelineConfig(path)).close()
    assert mode(folder) == 0o755
    assert mode(path) == 0o600
    assert any(str(folder) in r.getMessage() and "chmod 700" in r.getMessage() for r in caplog.records)


def test_the_event_log_is_created_0600_and_an_existing_one_made_0600(tmp_path):
    new = tmp_path / "logs" / "events.jsonl"
    log = JsonlLog(new)
    log(redacted(make_event("status", stream=None, message="watching stream 'rtsp://u:SECRETPW@10.0.0.5/x'")))
    log.close()
    assert mode(new) == 0o600 and mode(new.parent) == 0o700
    record = json.loads(new.read_text())
    assert record["message"] == "watching stream 'rtsp://***@10.0.0.5/x'"
    old = tmp_path / "old.jsonl"
    old.write_text('{"type": "status"}\n')
    old.chmod(0o644)
    JsonlLog(old).close()
    assert mode(old) == 0o600
    assert old.read_text() == '{"type": "status"}\n'  # appended to, not replaced


def test_events_are_redacted_at_any_depth():
    event = redacted(
        make_event(
            "answer",
            stream="cam",
            round=1,
            question="what is at rtsp://u:SECRETPW@h/y?",
            answer="see http://a:SECRETPW@cam/x",
            evidence=[{"source": "rtsp://u:SECRETPW@h/x", "start": 1.0, "end": 2.0}],  # in the stats' spans
            answer_tokens=3,
        )
    )
    assert "SECRETPW" not in json.dumps(to_record(event))
    assert "SECRETPW" not in event.question and "SECRETPW" not in event.answer
    assert event.stats.answer_tokens == 3 and event.evidence[0].start == 1.0
    assert "SECRETPW" not in event.evidence[0].source


def test_the_event_log_is_never_written_through_a_link_or_into_another_users_file(tmp_path, monkeypatch):
    """A planted symbolic link (to a file elsewhere) is refused, the file it points to untouched; a file of another
    user is refused too (as root here: its owner is made someone else with chown), and so is a FIFO."""
    target = tmp_path / "elsewhere.jsonl"
    target.write_text("")
    link = tmp_path / "events.jsonl"
    link.symlink_to(target)
    with pytest.raises(OSError, match="is a symbolic link"):
        JsonlLog(link)
    assert target.read_text() == ""
    theirs = tmp_path / "theirs.jsonl"
    theirs.write_text("")
    monkeypatch.setattr(os, "geteuid", lambda: os.stat(theirs).st_uid + 1)  # the file is not ours
    with pytest.raises(OSError, match="belongs to another user"):
        JsonlLog(theirs)
    monkeypatch.undo()
    fifo = tmp_path / "events.fifo"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):  # at once: a FIFO no one reads once hung the start
        JsonlLog(fifo)
