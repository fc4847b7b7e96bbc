"""The SQLite side of the timeline's backends: the embedded default, one file on one box (see database.py).

`SqliteWriter` and `SqliteReader` are what `TimelineStore` and `TimelineReader` call where SQL differs between
SQLite and PostgreSQL; the shared SQL (with `?` placeholders) is run through `execute` / `query`.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from timeline.config import TimelineConfig, TimelineError
from timeline.database import open_for_reading, open_for_writing
from timeline.query import fts_query, recency_boost
from timeline.rows import COLUMNS, Row

logger = logging.getLogger(__name__)

FTS_MERGE_PAGES = 256  # work done by one FTS5 'merge' after deletions (pages written)
BM25_WEIGHTS = (1.0, 1.0, 2.0)  # question, text, alert
INSERT_ROW = (
    f"INSERT INTO moments ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})"
    " ON CONFLICT DO NOTHING RETURNING id"
)


class SqliteWriter:
    """The writer's connection to the file. `errors`: what writing may raise; `lost`: errors worth
    reconnecting for (none: a file does not go away and come back)."""

    errors: tuple[type[BaseException], ...] = (sqlite3.Error,)
    lost: tuple[type[BaseException], ...] = ()

    def __init__(self, config: TimelineConfig) -> None:
        self.path = Path(config.path)
        self.conn = open_for_writing(self.path, config.busy_timeout_s, config.wal_bytes)
        stat = os.stat(self.path)
        self._identity = (stat.st_dev, stat.st_ino)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        return self.conn.execute(sql, params)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            self.conn.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise

    def insert(self, row: Row) -> int | None:
        """The new row's id, or None when it repeats one already kept (an alert's begin or end)."""
        found = self.conn.execute(INSERT_ROW, row.values()).fetchall()
        return found[0][0] if found else None

    def used_bytes(self) -> int:
        """Bytes of the pages in use (what the main file shrinks to at the next checkpoint)."""
        page_size = self.conn.execute("PRAGMA page_size").fetchone()[0]
        pages = self.conn.execute("PRAGMA page_count").fetchone()[0]
        free = self.conn.execute("PRAGMA freelist_count").fetchone()[0]
        return (pages - free) * page_size

    def after_delete(self) -> None:
        """Inside the deleting transaction: FTS5 merges its segments, so deleted entries go too."""
        self.conn.execute("INSERT INTO moments_fts (moments_fts, rank) VALUES ('merge', ?)", (FTS_MERGE_PAGES,))

    def reclaim(self) -> None:
        """After a delete: freed pages go back to the file system (every step frees one page: run them all)."""
        self.conn.execute("PRAGMA incremental_vacuum").fetchall()

    def problem(self) -> str | None:
        """Why the file can no longer be written (removed, replaced, made read-only), or None. SQLite itself
        would go on writing into a removed file, or through its open descriptor into a read-only one."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return f"the timeline {self.path} was removed"
        except OSError as err:
            return f"the timeline {self.path} cannot be checked ({err.strerror})"
        if (stat.st_dev, stat.st_ino) != self._identity:
            return f"the timeline {self.path} was replaced by another file"
        if stat.st_mode & 0o222 == 0:
            return f"the timeline {self.path} was made read-only"
        return None

    def reconnect(self) -> None:
        raise TimelineError(f"the timeline {self.path} cannot be opened again")

    def close(self) -> None:
        try:
            self.conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        except sqlite3.Error as err:
            logger.warning("timeline: the last checkpoint failed: %s", err)
        self.conn.close()

    def _rollback(self) -> None:
        if self.conn.in_transaction:
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.Error as err:
                logger.warning("timeline: rollback failed: %s", err)


class SqliteReader:
    """A read-only connection (WAL: it never blocks the writer, nor it them)."""

    def __init__(self, path: Path, busy_timeout_s: float) -> None:
        self.path = Path(path)
        self.conn = open_for_reading(self.path, busy_timeout_s)
        self.conn.create_function("recency_boost", 1, recency_boost, deterministic=True)

    def query(self, sql: str, params: Sequence[Any]) -> list[tuple]:
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as err:
            raise TimelineError(f"cannot read the timeline {self.path}: {err}") from err

    def text_search(self, select: str, filters: str, params: list[Any], text: str, now: float, limit: int):
        """Rows matching any word of `text` (FTS5, bm25 with the alert name weighing twice, times the recency
        boost; lower score is better), best first."""
        match = fts_query(text)
        if match is None:
            return []
        weights = ", ".join(map(str, BM25_WEIGHTS))
        sql = (
            f"SELECT {select}, bm25(moments_fts, {weights}) * recency_boost(? - m.t_wall) AS score"
            f" FROM moments_fts JOIN moments m ON m.id = moments_fts.rowid"
            f" WHERE moments_fts MATCH ? AND {filters} ORDER BY score, m.id DESC LIMIT ?"
        )
        return self.query(sql, [now, match, *params, limit])

    def close(self) -> None:
        self.conn.close()
