"""Searching the timeline: read-only connections (WAL: they never block the writer, nor it them).

Ranking: FTS5's bm25 (negative; more negative is more relevant; the alert name weighs twice a question's or an
answer's words) multiplied by a recency boost `1 + RECENCY_WEIGHT * 0.5 ** (age / RECENCY_HALF_LIFE_S)`: a row
written just now counts up to twice as relevant as an equally matching row from long ago, one a day old 1.5
times. Without text, the newest rows come first.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from app.timeline.config import TimelineError
from app.timeline.database import open_for_reading
from app.timeline.query import fts_query

RECENCY_WEIGHT = 1.0
RECENCY_HALF_LIFE_S = 86400.0
BM25_WEIGHTS = (1.0, 1.0, 2.0)  # question, text, alert
COLUMNS = "m.id, m.kind, m.stream, m.t_wall, m.start_s, m.end_s, m.question, m.text, m.who, m.p_yes, m.alert, m.state"
HAS_THUMBNAIL = "EXISTS (SELECT 1 FROM thumbnails t WHERE t.moment_id = m.id)"


@dataclass(frozen=True)
class Moment:
    """One row of the timeline. Times: `t_wall` seconds since the epoch; `start_s`/`end_s` stream seconds.
    `text`: the answer, "<alert> began|ended ...", or a stream event's message. `score`: lower is better (None
    without a text search)."""

    id: int
    kind: str
    stream: str | None
    t_wall: float
    start_s: float | None
    end_s: float | None
    question: str | None
    text: str | None
    who: str | None
    p_yes: float | None
    alert: str | None
    state: str | None
    has_thumbnail: bool
    score: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def recency_boost(age_s: float) -> float:
    return 1.0 + RECENCY_WEIGHT * 0.5 ** (max(age_s, 0.0) / RECENCY_HALF_LIFE_S)


class TimelineReader:
    """Searches a timeline file; never creates or changes it. `TimelineError` when it is missing or unreadable."""

    def __init__(self, path: Path, busy_timeout_s: float = 5.0) -> None:
        self.path = path
        self.conn = open_for_reading(path, busy_timeout_s)
        self.conn.create_function("recency_boost", 1, recency_boost, deterministic=True)

    def search(
        self,
        text: str | None = None,
        since_s: float | None = None,
        stream: str | None = None,
        limit: int = 20,
        now: float | None = None,
    ) -> list[Moment]:
        """Moments matching any word of `text` (all moments when None), written in the last `since_s` seconds,
        of `stream`, best first (see the module's ranking), at most `limit`."""
        now = time.time() if now is None else now
        filters = ["m.t_wall >= ?", "(? IS NULL OR m.stream = ?)"]
        params: list[Any] = [now - since_s if since_s is not None else float("-inf"), stream, stream]
        if text is None or not text.strip():
            sql = f"SELECT {COLUMNS}, {HAS_THUMBNAIL}, NULL FROM moments m WHERE {' AND '.join(filters)}"
            sql += " ORDER BY m.t_wall DESC, m.id DESC LIMIT ?"
            return self._moments(sql, [*params, limit])
        match = fts_query(text)
        if match is None:
            return []
        weights = ", ".join(map(str, BM25_WEIGHTS))
        sql = (
            f"SELECT {COLUMNS}, {HAS_THUMBNAIL}, bm25(moments_fts, {weights}) * recency_boost(? - m.t_wall) AS score"
            f" FROM moments_fts JOIN moments m ON m.id = moments_fts.rowid"
            f" WHERE moments_fts MATCH ? AND {' AND '.join(filters)} ORDER BY score, m.id DESC LIMIT ?"
        )
        return self._moments(sql, [now, match, *params, limit])

    def thumbnail(self, row_id: int) -> bytes | None:
        """The JPEG thumbnail of row `row_id`, or None."""
        row = self._query("SELECT jpeg FROM thumbnails WHERE moment_id = ?", [row_id])
        return bytes(row[0][0]) if row else None

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> TimelineReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _moments(self, sql: str, params: list[Any]) -> list[Moment]:
        return [Moment(*row[:12], bool(row[12]), row[13]) for row in self._query(sql, params)]

    def _query(self, sql: str, params: list[Any]) -> list[tuple]:
        try:
            return self.conn.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as err:
            raise TimelineError(f"cannot read the timeline {self.path}: {err}") from err
