"""Exact aggregates of a period, from the timeline's rows (SQLite and PostgreSQL alike: the same SQL).

Per watch (a stream's alert name): how many times it began in the period, the total and the longest time it was
on inside the period, its first and last begin, and (with `bucket`) the same per hour or per day of this machine's
local time. Per stream: its answers, its alerts begun, and its gaps (from a dropped or stopped capture to the next
start or reconnection) with their time down inside the period.

How long an alert was on: an ended alert lasted its `duration_s` (the stream's seconds, as its watch measured it;
on a live source these are wall seconds), an open one from its begin to now. An alert that began before the period
or ends after it counts the part of its wall-clock span inside the period, in proportion.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from timeline.period import Period

BUCKETS = ("hour", "day")
DOWN_STATES = ("reconnect", "stop", "end")  # a stream's capture dropped, or the stream stopped or its source ended
UP_STATES = ("start", "reconnected")
_FILTERS = "(CAST(? AS TEXT) IS NULL OR {a}.stream = ?) AND (CAST(? AS TEXT) IS NULL OR {a}.alert = ?)"

# every alert whose span meets the period: its begin (before `until`) and its end, if any (at or after `since`)
ALERTS_SQL = (
    "SELECT b.stream, b.alert, b.t_wall, e.t_wall, e.duration_s FROM moments b"
    " LEFT JOIN moments e ON e.kind = 'alert' AND e.alert_id = b.alert_id AND e.state = 'end'"
    " WHERE b.kind = 'alert' AND b.state = 'begin' AND b.alert_id IS NOT NULL AND b.t_wall < ?"
    " AND (e.t_wall IS NULL OR e.t_wall >= ?) AND " + _FILTERS.format(a="b")
)
# ends in the period whose begin the timeline no longer holds (retention took it, or it was never written)
ORPHAN_ENDS_SQL = (
    "SELECT e.stream, e.alert, e.t_wall, e.duration_s FROM moments e"
    " WHERE e.kind = 'alert' AND e.state = 'end' AND e.t_wall >= ? AND e.t_wall < ? AND "
    + _FILTERS.format(a="e")
    + " AND NOT EXISTS (SELECT 1 FROM moments b WHERE b.kind = 'alert' AND b.alert_id = e.alert_id"
    " AND b.state = 'begin')"
)
COUNTS_SQL = (
    "SELECT m.stream, m.kind, count(*) FROM moments m WHERE m.t_wall >= ? AND m.t_wall < ?"
    " AND m.stream IS NOT NULL AND (m.kind = 'answer' OR (m.kind = 'alert' AND m.state = 'begin'))"
    " AND (CAST(? AS TEXT) IS NULL OR m.stream = ?) GROUP BY m.stream, m.kind"
)
_STATES = ", ".join(f"'{state}'" for state in DOWN_STATES + UP_STATES)
# each stream's last up/down row before the period (was it down when the period began?), then the period's own
STREAM_STATES_SQL = (
    "SELECT m.stream, m.t_wall, m.state FROM moments m WHERE m.kind = 'stream' AND m.state IN (" + _STATES + ")"
    " AND (CAST(? AS TEXT) IS NULL OR m.stream = ?) AND (m.t_wall >= ? AND m.t_wall < ? OR m.id IN"
    " (SELECT max(p.id) FROM moments p WHERE p.kind = 'stream' AND p.state IN (" + _STATES + ")"
    " AND p.t_wall < ? GROUP BY p.stream)) ORDER BY m.t_wall, m.id"
)
WATCH_NAMES_SQL = "SELECT DISTINCT m.stream, m.alert FROM moments m WHERE m.kind = 'alert' AND m.alert IS NOT NULL"
STREAM_NAMES_SQL = "SELECT DISTINCT m.stream FROM moments m WHERE m.stream IS NOT NULL"


@dataclass(frozen=True)
class Bucket:
    """One hour or day (local time) of a watch: `start` wall seconds; `began` alerts begun; `on_s` seconds on."""

    start: float
    began: int
    on_s: float


@dataclass(frozen=True)
class WatchSummary:
    """A watch on one stream over the period. `on_s`, `longest_s`: seconds on inside the period; `first`,
    `last`: wall times of its first and last begin in the period (None when none began); `on_now`: an alert of
    it is open at the period's end."""

    stream: str
    watch: str
    began: int
    on_s: float
    longest_s: float
    first: float | None
    last: float | None
    on_now: bool
    buckets: list[Bucket] = field(default_factory=list)


@dataclass(frozen=True)
class Gap:
    """A stream down from `start` to `end` (wall seconds; `end` None: still down at the period's end)."""

    start: float
    end: float | None
    reason: str


@dataclass(frozen=True)
class StreamSummary:
    stream: str
    answers: int
    alerts: int
    down_s: float
    gaps: list[Gap] = field(default_factory=list)


@dataclass(frozen=True)
class Summary:
    since: float
    until: float
    bucket: str | None
    streams: list[StreamSummary]
    watches: list[WatchSummary]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _On:
    """One alert's span: wall begin and end (None: open), and its length in seconds when it ended."""

    begin: float
    end: float | None
    length: float | None


def summarize(
    db: Any, span: Period, stream: str | None = None, watch: str | None = None, bucket: str | None = None
) -> Summary:
    """The aggregates of `span` (see the module), of one stream and/or watch when given. `db`: a backend reader
    (`query(sql, params)`). ValueError for an unknown `bucket`."""
    if bucket is not None and bucket not in BUCKETS:
        raise ValueError(f"invalid bucket {bucket!r}: expected one of {', '.join(BUCKETS)}")
    filters = [stream, stream, watch, watch]
    alerts: dict[tuple[str, str], list[_On]] = defaultdict(list)
    for name, alert, begin, end, duration in db.query(ALERTS_SQL, [span.until, span.since, *filters]):
        alerts[(name, alert)].append(_On(begin, end, duration))
    for name, alert, end, duration in db.query(ORPHAN_ENDS_SQL, [span.since, span.until, *filters]):
        length = float(duration or 0.0)
        alerts[(name, alert)].append(_On(end - length, end, length))
    watches = [_watch(name, alert, spans, span, bucket) for (name, alert), spans in sorted(alerts.items())]
    streams = _streams(db, span, stream) if watch is None else []
    return Summary(span.since, span.until, bucket, streams, watches)


def known_names(db: Any) -> tuple[list[str], list[tuple[str, str]]]:
    """Every stream and every (stream, watch) the timeline holds a row of, sorted."""
    streams = sorted(row[0] for row in db.query(STREAM_NAMES_SQL, []))
    watches = sorted((row[0] or "", row[1]) for row in db.query(WATCH_NAMES_SQL, []))
    return streams, watches


def _inside(on: _On, start: float, stop: float) -> float:
    """Seconds of `on` inside [start, stop): its length in proportion to the share of its wall span inside."""
    end = stop if on.end is None else on.end
    wall = max(end - on.begin, 0.0)
    overlap = max(min(end, stop) - max(on.begin, start), 0.0)
    if on.end is None or on.length is None:
        return overlap
    if wall <= 0.0:
        return on.length if start <= on.begin < stop else 0.0
    return on.length * overlap / wall


def _watch(stream: str, alert: str, spans: list[_On], span: Period, bucket: str | None) -> WatchSummary:
    begun = sorted(on.begin for on in spans if span.since <= on.begin < span.until)
    inside = [_inside(on, span.since, span.until) for on in spans]
    buckets = []
    if bucket is not None:
        for start, stop in _bucket_edges(span, bucket):
            buckets.append(
                Bucket(
                    start=start,
                    began=sum(1 for on in spans if start <= on.begin < stop),
                    on_s=round(sum(_inside(on, start, stop) for on in spans), 3),
                )
            )
    return WatchSummary(
        stream=stream,
        watch=alert,
        began=len(begun),
        on_s=round(sum(inside), 3),
        longest_s=round(max(inside, default=0.0), 3),
        first=begun[0] if begun else None,
        last=begun[-1] if begun else None,
        on_now=any(on.end is None or on.end >= span.until for on in spans),
        buckets=buckets,
    )


def _bucket_edges(span: Period, bucket: str) -> list[tuple[float, float]]:
    """The local hours or days the period touches, each as [start, stop) clipped to the period."""
    local = time.localtime(span.since)
    if bucket == "hour":
        start = time.mktime((*local[:4], 0, 0, 0, 0, -1))
    else:
        start = time.mktime((*local[:3], 0, 0, 0, 0, 0, -1))
    edges = []
    while start < span.until:
        parts = time.localtime(start)
        # the next hour or local midnight (mktime normalises 24:00 and day 32; DST days are 23 or 25 hours)
        if bucket == "hour":
            stop = time.mktime((*parts[:3], parts[3] + 1, 0, 0, 0, 0, -1))
        else:
            stop = time.mktime((*parts[:2], parts[2] + 1, 0, 0, 0, 0, 0, -1))
        edges.append((max(start, span.since), min(stop, span.until)))
        start = stop
    return edges


def _streams(db: Any, span: Period, stream: str | None) -> list[StreamSummary]:
    counts: dict[str, dict[str, int]] = defaultdict(lambda: {"answer": 0, "alert": 0})
    for name, kind, count in db.query(COUNTS_SQL, [span.since, span.until, stream, stream]):
        counts[name][kind] = int(count)
    gaps: dict[str, list[Gap]] = defaultdict(list)
    down_since: dict[str, tuple[float, str]] = {}
    params = [stream, stream, span.since, span.until, span.since]
    for name, t_wall, state in db.query(STREAM_STATES_SQL, params):
        if state in DOWN_STATES and name not in down_since:
            down_since[name] = (max(t_wall, span.since), state)
        elif state in UP_STATES and name in down_since:
            start, reason = down_since.pop(name)
            if t_wall > span.since:
                gaps[name].append(Gap(start, t_wall, reason))
    for name, (start, reason) in down_since.items():
        gaps[name].append(Gap(start, None, reason))
    summaries = []
    for name in sorted(set(counts) | set(gaps)):
        down = sum((gap.end if gap.end is not None else span.until) - gap.start for gap in gaps[name])
        summaries.append(StreamSummary(name, counts[name]["answer"], counts[name]["alert"], round(down, 3), gaps[name]))
    return summaries
