"""The PostgreSQL side of the timeline's backends: one database that several boxes write and search.

`PgWriter` and `PgReader` mirror `SqliteWriter` and `SqliteReader`: the shared SQL is written with `?`
placeholders and turned into psycopg's `%s` here. Search uses PostgreSQL's own full-text search: the person's
words in `websearch_to_tsquery` syntax (`"red car" -blue`), where plain words and phrases are OR'ed (a moment
matching any of them is found, like the SQLite reader; matching more ranks higher) and `-word` excludes.
Ranking: `ts_rank` (alert name weighs twice a question's or an answer's words), negated so lower is better,
times the same recency boost as SQLite's (timeline/query.py).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg

from timeline.config import TimelineConfig, TimelineError
from timeline.pg_schema import TEXT_CONFIG, one_line, open_for_reading, open_for_writing
from timeline.postgres_target import PostgresTarget
from timeline.query import MAX_TERMS, RECENCY_HALF_LIFE_S, RECENCY_WEIGHT, WORD
from timeline.rows import COLUMNS, Row

logger = logging.getLogger(__name__)

INSERT_ROW = (
    f"INSERT INTO moments (uid, {', '.join(COLUMNS)}) VALUES (%s{', %s' * len(COLUMNS)})"
    " ON CONFLICT DO NOTHING RETURNING id"
)
RANK_WEIGHTS = "{0.1, 0.2, 0.5, 1.0}"  # D, C, B (question, text), A (alert name)
# the exponent is capped: PostgreSQL raises on underflow (0.5 ** 1000 is ~1e-301, as good as 0 here)
BOOST = f"(1 + {RECENCY_WEIGHT} * power(0.5, least(greatest(%s - m.t_wall, 0) / {RECENCY_HALF_LIFE_S}, 1000)))"
TERM = re.compile(r'(-?)"([^"]*)"?|(-?)(\S+)')


def placeholders(sql: str) -> str:
    """The shared SQL's `?` as psycopg's `%s` (the shared SQL holds no other `?` nor `%`)."""
    return sql.replace("?", "%s")


def clean(value: Any) -> Any:
    """PostgreSQL text cannot hold NUL characters: they become U+FFFD."""
    return value.replace("\x00", "\ufffd") if isinstance(value, str) else value


def websearch_terms(text: str) -> tuple[list[str], list[str]]:
    """The words and "quoted phrases" of `text` to match (any of them), and those after a `-` to exclude.
    Outside quotes, words are `\\w+` runs (as for SQLite: `col:truck` is two words). Each goes to
    `websearch_to_tsquery` on its own, which never fails on odd input."""
    wanted: list[str] = []
    unwanted: list[str] = []
    for minus_phrase, phrase, minus_word, word in TERM.findall(clean(text)):
        if phrase.strip():
            terms = [f'"{phrase}"']
        else:
            terms = [w for w in WORD.findall(word) if w.lower() != "or"]
        (unwanted if (minus_phrase or minus_word) else wanted).extend(terms)
    return wanted[:MAX_TERMS], unwanted[:MAX_TERMS]


class PgWriter:
    """The writer's connection to the database. `lost`: errors after which it reconnects and writes again."""

    errors: tuple[type[BaseException], ...] = (psycopg.Error,)
    lost: tuple[type[BaseException], ...] = (psycopg.OperationalError, psycopg.InterfaceError)

    def __init__(self, config: TimelineConfig) -> None:
        if not isinstance(config.path, PostgresTarget):
            raise TypeError(f"PgWriter needs a PostgresTarget, got {type(config.path).__name__}")
        self.target = config.path
        self.conn = open_for_writing(self.target)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> psycopg.Cursor:
        return self.conn.execute(placeholders(sql), params)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with self.conn.transaction():
            yield

    def insert(self, row: Row) -> int | None:
        """The new row's id, or None when it repeats one already kept (its uid, or an alert's begin or end)."""
        found = self.conn.execute(INSERT_ROW, [row.uid, *map(clean, row.values())]).fetchone()
        return found[0] if found else None

    def used_bytes(self) -> int:
        """Bytes of the rows and thumbnails kept (what retention bounds; indexes and free space not counted:
        PostgreSQL reuses the space of deleted rows rather than giving it back). A JPEG's size is read from its
        TOAST pointer (`pg_column_size` of the column, not of the whole row, which would fetch it)."""
        sql = (
            "SELECT (SELECT coalesce(sum(pg_column_size(m.*)), 0) FROM moments m)"
            " + (SELECT coalesce(sum(pg_column_size(t.jpeg) + 16), 0) FROM thumbnails t)"
        )
        return int(self.conn.execute(sql).fetchone()[0])

    def after_delete(self) -> None:
        """Nothing: the GIN index and the thumbnails (ON DELETE CASCADE) follow the rows."""

    def reclaim(self) -> None:
        """Nothing: autovacuum makes the space of deleted rows reusable."""

    def problem(self) -> str | None:
        return None

    def reconnect(self) -> None:
        """A new connection (the old one closed). Raises `TimelineError` while the server cannot be reached."""
        self.close()
        self.conn = open_for_writing(self.target)

    def close(self) -> None:
        try:
            self.conn.close()
        except psycopg.Error as err:
            logger.warning("timeline: closing failed: %s", one_line(err))


class PgReader:
    """A read-only connection (`default_transaction_read_only`)."""

    def __init__(self, target: PostgresTarget) -> None:
        self.target = target
        self.conn = open_for_reading(target)

    def query(self, sql: str, params: Sequence[Any]) -> list[tuple]:
        try:
            return self.conn.execute(placeholders(sql), [clean(p) for p in params]).fetchall()
        except psycopg.Error as err:
            raise TimelineError(f"cannot read the timeline {self.target}: {one_line(err)}") from None

    def text_search(self, select: str, filters: str, params: list[Any], text: str, now: float, limit: int):
        """Rows matching any word or phrase of `text` and none after a `-`, best first (lower score)."""
        wanted, unwanted = websearch_terms(text)
        if not wanted and not unwanted:
            return []
        parse = f"websearch_to_tsquery('{TEXT_CONFIG}', ?)"
        match = " || ".join([parse] * len(wanted)) or "''::tsquery"
        query = f"({match})" + "".join(f" && !!{parse}" for _ in unwanted)
        sql = (
            f"SELECT {select}, -ts_rank('{RANK_WEIGHTS}', m.search, q.query) * {BOOST.replace('%s', '?')} AS score"
            f" FROM moments m, (SELECT {query} AS query) q"
            f" WHERE m.search @@ q.query AND {filters} ORDER BY score, m.id DESC LIMIT ?"
        )
        return self.query(sql, [now, *wanted, *unwanted, *params, limit])

    def close(self) -> None:
        try:
            self.conn.close()
        except psycopg.Error as err:
            logger.warning("timeline: closing failed: %s", one_line(err))
