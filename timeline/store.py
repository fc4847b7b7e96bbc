"""The write side of the timeline: rows in small transactions, and retention by age and by size.

Used by one thread only (the `TimelineWriter`'s). The logic is the same for every backend (SQLite or
PostgreSQL, see backends.py); where their SQL differs, the backend (`self.db`) does it. Retention runs every
`check_every` rows: rows older than `days` go, then the oldest go (about 5 % of the rows per pass) while the
bytes in use exceed `max_bytes`. SQLite hands freed pages back (`PRAGMA incremental_vacuum`) and merges its
FTS5 segments; PostgreSQL's autovacuum makes the space reusable.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from timeline.backends import open_writer
from timeline.config import TimelineConfig, TimelineError
from timeline.rows import COLUMNS, Row

logger = logging.getLogger(__name__)

SIZE_PASS_FRACTION = 0.05  # of the rows, deleted per pass while over max_bytes

__all__ = ["COLUMNS", "Row", "TimelineStore"]


class TimelineStore:
    """Opens (or creates) the timeline for writing; `TimelineError` when it cannot.

    `errors`: the backend's exceptions writing may raise; `lost`: those after which `reconnect` may succeed
    (a database server that went away; none for a file)."""

    def __init__(self, config: TimelineConfig) -> None:
        self.config = config
        self.db = open_writer(config)
        self.errors: tuple[type[BaseException], ...] = self.db.errors
        self.lost: tuple[type[BaseException], ...] = self.db.lost
        self._since_check = 0

    @property
    def conn(self) -> Any:
        """The backend's connection (sqlite3 or psycopg)."""
        return self.db.conn

    def write(self, rows: Sequence[Row], now: float | None = None) -> int:
        """Writes `rows` in one transaction, then runs retention if it is due. Returns how many were new (a
        row written before, or an alert's begin or end already kept, is skipped).

        Raises:
            TimelineError: the file was removed, replaced or made read-only since it was opened.
            self.errors: the backend failed (disk full, I/O error, locked past the busy timeout, server gone).
        """
        problem = self.db.problem()
        if problem:
            raise TimelineError(problem)
        written = 0
        with self.db.transaction():
            for row in rows:
                row_id = self.db.insert(row)
                if row_id is None:
                    logger.info("timeline: a repeated %s row was not written again", row.kind)
                    continue
                written += 1
                if row.thumbnail is not None:
                    self.db.execute("INSERT INTO thumbnails (moment_id, jpeg) VALUES (?, ?)", (row_id, row.thumbnail))
        self._since_check += len(rows)
        if self._since_check >= self.config.check_every:
            self._since_check = 0
            self.enforce_retention(time.time() if now is None else now)
        return written

    def enforce_retention(self, now: float) -> int:
        """Deletes rows older than `days` before `now`, then the oldest while over `max_bytes`; returns how
        many rows went. Their thumbnails and index entries go with them."""
        deleted = self._delete("DELETE FROM moments WHERE t_wall < ?", (now - self.config.days * 86400.0,))
        while self.used_bytes() > self.config.max_bytes:
            count = self.db.execute("SELECT count(*) FROM moments").fetchone()[0]
            if count == 0:
                break
            batch = max(1, int(count * SIZE_PASS_FRACTION))
            sql = "DELETE FROM moments WHERE id IN (SELECT id FROM moments ORDER BY t_wall, id LIMIT ?)"
            deleted += self._delete(sql, (batch,))
        if deleted:
            logger.info("timeline: retention deleted %d rows; %d bytes in use", deleted, self.used_bytes())
        return deleted

    def used_bytes(self) -> int:
        """Bytes in use: SQLite's pages in use (what the file shrinks to at the next checkpoint); PostgreSQL's
        rows and thumbnails."""
        return self.db.used_bytes()

    def file_problem(self) -> str | None:
        """Why the timeline can no longer be written (a file removed, replaced, made read-only), or None."""
        return self.db.problem()

    def reconnect(self) -> None:
        """Opens the backend again after one of `lost`; raises `TimelineError` (or `lost`) while it cannot."""
        self.db.reconnect()

    def close(self) -> None:
        self.db.close()

    def _delete(self, sql: str, params: tuple) -> int:
        with self.db.transaction():
            deleted = self.db.execute(sql, params).rowcount
            if deleted:
                self.db.after_delete()
        if deleted:
            self.db.reclaim()
        return deleted
