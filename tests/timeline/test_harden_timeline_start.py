"""The SQLite timeline starts without "the last checkpoint failed: database table is locked" (issue 39).

Why it was printed: the app opens the timeline once before the model loads (`TimelineWriter(...).close()`, so a
timeline that cannot be opened fails early). On a new, empty file that open ran `PRAGMA quick_check`, and SQLite
(3.40 here; the sqlite3 shell does the same) leaves a connection that ran quick_check on an empty database unable
to checkpoint its WAL later in its life: the checkpoint at close failed with SQLITE_LOCKED. An empty file has
nothing to check, so the check is skipped there.

The app starting a new SQLite timeline without the warning is checked on the run of
tests/app/test_app_timeline.py (test_answers_land_in_the_timeline_history_finds_them_and_a_question_cites_them)."""

from __future__ import annotations

import logging

from timeline.config import TimelineConfig
from timeline.writer import TimelineWriter


def test_a_new_timeline_opens_and_closes_without_a_warning(tmp_path, caplog) -> None:
    config = TimelineConfig(path=tmp_path / "timeline" / "timeline.sqlite")
    with caplog.at_level(logging.WARNING):
        TimelineWriter(config).close()  # new file
        TimelineWriter(config).close()  # existing file
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert not (tmp_path / "timeline" / "timeline.sqlite-wal").exists() or (
        (tmp_path / "timeline" / "timeline.sqlite-wal").stat().st_size == 0
    )
