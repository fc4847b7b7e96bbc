"""Searching the timeline: read-only connections (SQLite in WAL mode, or PostgreSQL: they never block the
writer, nor it them).

Ranking: the text match's relevance (SQLite: FTS5's bm25; PostgreSQL: ts_rank; negative, more negative is more
relevant; the alert name weighs twice a question's or an answer's words) multiplied by a recency boost
`1 + RECENCY_WEIGHT * 0.5 ** (age / RECENCY_HALF_LIFE_S)`: a row written just now counts up to twice as relevant
as an equally matching row from long ago, one a day old 1.5 times. Without text, the newest rows come first.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

from timeline.backends import open_reader
from timeline.config import Location, TimelineError
from timeline.day import MAX_SEGMENTS, Day, day
from timeline.period import Period
from timeline.query import MAX_SEARCH_CHARS, RECENCY_HALF_LIFE_S, RECENCY_WEIGHT, recency_boost
from timeline.recap import DEFAULT_LINES, DEFAULT_THUMBNAILS, Recap, recap
from timeline.summary import Summary, known_names, summarize

__all__ = ["RECENCY_HALF_LIFE_S", "RECENCY_WEIGHT", "Moment", "TimelineReader", "recency_boost"]

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


class TimelineReader:
    """Searches a timeline (a file, or a `PostgresTarget`); never creates or changes it. `TimelineError` when it
    is missing or unreadable."""

    def __init__(self, path: Location, busy_timeout_s: float = 5.0) -> None:
        self.path = path
        self.db = open_reader(path, busy_timeout_s)

    def search(
        self,
        text: str | None = None,
        since_s: float | None = None,
        stream: str | None = None,
        limit: int = 20,
        now: float | None = None,
    ) -> list[Moment]:
        """Moments matching any word of `text` (all moments when None), written in the last `since_s` seconds,
        of `stream`, best first (see the module's ranking), at most `limit`. TimelineError for a `text` longer
        than `MAX_SEARCH_CHARS`."""
        if text is not None and len(text) > MAX_SEARCH_CHARS:
            raise TimelineError(
                f"the search text is too long ({len(text):,} characters; at most {MAX_SEARCH_CHARS:,}): "
                "search for a few words"
            )
        now = time.time() if now is None else now
        filters = "m.t_wall >= ? AND (CAST(? AS TEXT) IS NULL OR m.stream = ?)"
        params: list[Any] = [now - since_s if since_s is not None else float("-inf"), stream, stream]
        select = f"{COLUMNS}, {HAS_THUMBNAIL}"
        if text is None or not text.strip():
            sql = f"SELECT {select}, NULL FROM moments m WHERE {filters} ORDER BY m.t_wall DESC, m.id DESC LIMIT ?"
            return self._moments(self.db.query(sql, [*params, limit]))
        return self._moments(self.db.text_search(select, filters, params, text, now, limit))

    def summary(
        self, span: Period, stream: str | None = None, watch: str | None = None, bucket: str | None = None
    ) -> Summary:
        """Counts and durations of `span` per watch and per stream (timeline.summary)."""
        return summarize(self.db, span, stream=stream, watch=watch, bucket=bucket)

    def recap(
        self,
        span: Period,
        stream: str | None = None,
        watch: str | None = None,
        max_lines: int = DEFAULT_LINES,
        max_thumbnails: int = DEFAULT_THUMBNAILS,
    ) -> Recap:
        """The period's alerts, runs of equal answers and gaps, each citing its moments (timeline.recap)."""
        return recap(self.db, span, stream, watch, max_lines=max_lines, max_thumbnails=max_thumbnails)

    def day(self, span: Period, stream: str | None = None, max_segments: int = MAX_SEGMENTS) -> Day:
        """The period's strips per stream and per watch, each segment citing its moment (timeline.day)."""
        return day(self.db, span, stream=stream, max_segments=max_segments)

    def names(self) -> tuple[list[str], list[tuple[str, str]]]:
        """Every stream, and every (stream, watch), the timeline holds a row of."""
        return known_names(self.db)

    def thumbnail(self, row_id: int) -> bytes | None:
        """The JPEG thumbnail of row `row_id`, or None."""
        row = self.db.query("SELECT jpeg FROM thumbnails WHERE moment_id = ?", [row_id])
        return bytes(row[0][0]) if row else None

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> TimelineReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def _moments(rows: list[tuple]) -> list[Moment]:
        return [Moment(*row[:12], bool(row[12]), row[13]) for row in rows]
