"""The write side of the timeline: rows in small transactions, and retention by age and by size.

Used by one thread only (the `TimelineWriter`'s). Retention runs every `check_every` rows: rows older than
`days` go, then the oldest go (about 5 % of the rows per pass) while the pages in use exceed `max_bytes`.
Freed pages are handed back with `PRAGMA incremental_vacuum`, so the file shrinks at the next checkpoint
instead of only not growing; FTS5 merges its segments after deletions so its deleted entries are dropped too.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import astuple, dataclass, fields

from app.timeline.config import TimelineConfig, TimelineError
from app.timeline.database import open_for_writing

logger = logging.getLogger(__name__)

SIZE_PASS_FRACTION = 0.05  # of the rows, deleted per pass while over max_bytes
FTS_MERGE_PAGES = 256  # work done by one FTS5 'merge' after deletions (pages written)


@dataclass(frozen=True)
class Row:
    """One row of `moments` (see database.SCHEMA for the columns) and its thumbnail (JPEG), if any."""

    kind: str
    t_wall: float
    stream: str | None
    start_s: float | None = None
    end_s: float | None = None
    question: str | None = None
    text: str | None = None
    who: str | None = None
    p_yes: float | None = None
    alert: str | None = None
    alert_id: str | None = None
    state: str | None = None
    duration_s: float | None = None
    round: int | None = None
    evidence: str | None = None
    thumbnail: bytes | None = None


COLUMNS = [f.name for f in fields(Row) if f.name != "thumbnail"]
INSERT_ROW = f"INSERT INTO moments ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"


class TimelineStore:
    """Opens (or creates) the timeline file for writing; `TimelineError` when it cannot."""

    def __init__(self, config: TimelineConfig) -> None:
        self.config = config
        self.conn = open_for_writing(config.path, config.busy_timeout_s, config.wal_bytes)
        stat = os.stat(config.path)
        self._identity = (stat.st_dev, stat.st_ino)
        self._since_check = 0

    def write(self, rows: Sequence[Row], now: float | None = None) -> None:
        """Writes `rows` in one transaction, then runs retention if it is due.

        Raises:
            TimelineError: the file was removed, replaced or made read-only since it was opened.
            sqlite3.Error: SQLite failed (disk full, I/O error, locked past the busy timeout, ...).
        """
        problem = self.file_problem()
        if problem:
            raise TimelineError(problem)
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            for row in rows:
                cursor = self.conn.execute(INSERT_ROW, astuple(row)[: len(COLUMNS)])
                if row.thumbnail is not None:
                    self.conn.execute("INSERT INTO thumbnails VALUES (?, ?)", (cursor.lastrowid, row.thumbnail))
            self.conn.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise
        self._since_check += len(rows)
        if self._since_check >= self.config.check_every:
            self._since_check = 0
            self.enforce_retention(time.time() if now is None else now)

    def enforce_retention(self, now: float) -> int:
        """Deletes rows older than `days` before `now`, then the oldest while over `max_bytes`; returns how
        many rows went. Their thumbnails and index entries go with them (triggers)."""
        deleted = self._delete("DELETE FROM moments WHERE t_wall < ?", (now - self.config.days * 86400.0,))
        while self.used_bytes() > self.config.max_bytes:
            count = self.conn.execute("SELECT count(*) FROM moments").fetchone()[0]
            if count == 0:
                break
            batch = max(1, int(count * SIZE_PASS_FRACTION))
            sql = "DELETE FROM moments WHERE id IN (SELECT id FROM moments ORDER BY t_wall, id LIMIT ?)"
            deleted += self._delete(sql, (batch,))
        if deleted:
            logger.info("timeline: retention deleted %d rows; %d bytes in use", deleted, self.used_bytes())
        return deleted

    def used_bytes(self) -> int:
        """Bytes of the pages in use (what the main file shrinks to at the next checkpoint)."""
        page_size = self.conn.execute("PRAGMA page_size").fetchone()[0]
        pages = self.conn.execute("PRAGMA page_count").fetchone()[0]
        free = self.conn.execute("PRAGMA freelist_count").fetchone()[0]
        return (pages - free) * page_size

    def file_problem(self) -> str | None:
        """Why the file can no longer be written (removed, replaced, made read-only), or None. SQLite itself
        would go on writing into a removed file, or through its open descriptor into a read-only one."""
        path = self.config.path
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            return f"the timeline {path} was removed"
        except OSError as err:
            return f"the timeline {path} cannot be checked ({err.strerror})"
        if (stat.st_dev, stat.st_ino) != self._identity:
            return f"the timeline {path} was replaced by another file"
        if stat.st_mode & 0o222 == 0:
            return f"the timeline {path} was made read-only"
        return None

    def close(self) -> None:
        try:
            self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error as err:
            logger.warning("timeline: the last checkpoint failed: %s", err)
        self.conn.close()

    def _delete(self, sql: str, params: tuple) -> int:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            deleted = self.conn.execute(sql, params).rowcount
            if deleted:
                self.conn.execute("INSERT INTO moments_fts (moments_fts, rank) VALUES ('merge', ?)", (FTS_MERGE_PAGES,))
            self.conn.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise
        if deleted:
            self.conn.execute("PRAGMA incremental_vacuum").fetchall()  # every step frees one page: run them all
        return deleted

    def _rollback(self) -> None:
        if self.conn.in_transaction:
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.Error as err:
                logger.warning("timeline: rollback failed: %s", err)
