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

import bisect
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from timeline.period import Period, PeriodError

BUCKETS = ("hour", "day")
MAX_BUCKETS = 800  # a month of hours (744) fits; a year of them is asked per day
DOWN_STATES = ("reconnect", "stop", "end")  # a stream's capture dropped, or the stream stopped or its source ended
UP_STATES = ("start", "reconnected")
_FILTERS = "(CAST(? AS TEXT) IS NULL OR {a}.stream = ?) AND (CAST(? AS TEXT) IS NULL OR {a}.alert = ?)"

# the period's ends (more than those found with their begin: some lost it), read in the index (moments_kind_t_wall)
END_COUNT_SQL = (
    "SELECT count(*) FROM moments m WHERE m.kind = 'alert' AND m.t_wall >= ? AND m.t_wall < ?"
    " AND m.state = 'end' AND m.alert_id IS NOT NULL AND " + _FILTERS.format(a="m")
)
# an alert's seconds on inside [since, until) when it began inside (timeline.summary._inside, in SQL)
_LENGTH = "COALESCE(e.duration_s, e.t_wall - b.t_wall)"
_INSIDE = (
    f"CASE WHEN e.t_wall IS NULL THEN ? - b.t_wall WHEN e.t_wall < ? THEN {_LENGTH}"
    f" WHEN e.t_wall > b.t_wall THEN {_LENGTH} * (? - b.t_wall) / (e.t_wall - b.t_wall) ELSE {_LENGTH} END"
)
# per watch, the alerts begun in the period with their ends: begins, first, last, ends inside, seconds on,
# the longest, and how many are still on at the period's end
BEGUN_SQL = (
    f"SELECT b.stream, b.alert, count(*), min(b.t_wall), max(b.t_wall), count(CASE WHEN e.t_wall < ? THEN 1 END),"
    f" sum({_INSIDE}), max({_INSIDE}), count(CASE WHEN e.t_wall IS NULL OR e.t_wall >= ? THEN 1 END)"
    " FROM moments b LEFT JOIN moments e ON e.kind = 'alert' AND e.alert_id = b.alert_id AND e.state = 'end'"
    " WHERE b.kind = 'alert' AND b.t_wall >= ? AND b.t_wall < ? AND b.state = 'begin' AND b.alert_id IS NOT NULL"
    " AND " + _FILTERS.format(a="b") + " GROUP BY b.stream, b.alert"
)
# one row each: the alerts begun in the period and not ended in it (for buckets)
CROSSING_SQL = (
    "SELECT b.alert_id, b.stream, b.alert, b.t_wall, e.t_wall, e.duration_s FROM moments b"
    " LEFT JOIN moments e ON e.kind = 'alert' AND e.alert_id = b.alert_id AND e.state = 'end'"
    " WHERE b.kind = 'alert' AND b.t_wall >= ? AND b.t_wall < ? AND b.state = 'begin' AND b.alert_id IS NOT NULL"
    " AND (e.t_wall IS NULL OR e.t_wall >= ?) AND " + _FILTERS.format(a="b")
)
ORPHAN_ENDS_SQL = (  # ends in the period whose begin the timeline no longer holds (retention took it)
    "SELECT e.stream, e.alert, e.t_wall, e.duration_s FROM moments e"
    " WHERE e.kind = 'alert' AND e.t_wall >= ? AND e.t_wall < ? AND e.state = 'end' AND e.alert_id IS NOT NULL AND "
    + _FILTERS.format(a="e")
    + " AND NOT EXISTS (SELECT 1 FROM moments b WHERE b.kind = 'alert' AND b.alert_id = e.alert_id"
    " AND b.state = 'begin')"
)
# the period's alert begins and ends, one row each (for buckets), then the alerts begun before it, not ended before
ALERT_ROWS_SQL = (
    "SELECT m.alert_id, m.state, m.stream, m.alert, m.t_wall, m.duration_s FROM moments m"
    " WHERE m.kind = 'alert' AND m.t_wall >= ? AND m.t_wall < ? AND m.alert_id IS NOT NULL AND "
    + _FILTERS.format(a="m")
)
EARLIER_ALERTS_SQL = (
    "SELECT b.alert_id, b.stream, b.alert, b.t_wall, e.t_wall, e.duration_s FROM moments b"
    " LEFT JOIN moments e ON e.kind = 'alert' AND e.alert_id = b.alert_id AND e.state = 'end'"
    " WHERE b.kind = 'alert' AND b.t_wall < ? AND b.state = 'begin' AND b.alert_id IS NOT NULL"
    " AND (e.t_wall IS NULL OR e.t_wall >= ?) AND " + _FILTERS.format(a="b")
)
ANSWER_COUNTS_SQL = (
    "SELECT m.stream, count(*) FROM moments m WHERE m.kind = 'answer' AND m.t_wall >= ? AND m.t_wall < ?"
    " AND m.stream IS NOT NULL AND (CAST(? AS TEXT) IS NULL OR m.stream = ?) GROUP BY m.stream"
)
_STATES = ", ".join(f"'{state}'" for state in DOWN_STATES + UP_STATES)
# the period's up/down rows of each stream, and each stream's last one before the period (down when it began?)
STREAM_STATES_SQL = (
    "SELECT m.stream, m.t_wall, m.state FROM moments m WHERE m.kind = 'stream' AND m.t_wall >= ? AND m.t_wall < ?"
    " AND m.state IN (" + _STATES + ") AND (CAST(? AS TEXT) IS NULL OR m.stream = ?) ORDER BY m.t_wall, m.id"
)
STATES_BEFORE_SQL = (
    "SELECT m.stream, m.t_wall, m.state FROM moments m WHERE m.id IN (SELECT max(p.id) FROM moments p"
    " WHERE p.kind = 'stream' AND p.t_wall < ? AND p.state IN (" + _STATES + ")"
    " AND (CAST(? AS TEXT) IS NULL OR p.stream = ?) GROUP BY p.stream)"
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
    orphan: bool = False  # its begin row is gone: its time on counts, not a begin


def summarize(
    db: Any, span: Period, stream: str | None = None, watch: str | None = None, bucket: str | None = None
) -> Summary:
    """The aggregates of `span` (see the module), of one stream and/or watch when given. `db`: a backend reader
    (`query(sql, params)`). ValueError for an unknown `bucket`; PeriodError for more than MAX_BUCKETS of them."""
    if bucket is not None and bucket not in BUCKETS:
        raise ValueError(f"invalid bucket {bucket!r}: expected one of {', '.join(BUCKETS)}")
    if bucket is not None and span.seconds / (3600.0 if bucket == "hour" else 86400.0) > MAX_BUCKETS - 2:
        raise PeriodError(
            f"the period holds more than {MAX_BUCKETS - 2} {bucket}s: ask per day or for a shorter period"
        )
    filters = [stream, stream, watch, watch]
    if bucket is None:
        watches = _watches_in_sql(db, span, filters)
    else:
        watches = [
            _watch(name, alert, spans, span, bucket)
            for (name, alert), spans in sorted(_spans(db, span, filters).items())
        ]
    streams = []
    if watch is None:  # every alert of the stream(s) was read above: their begins are counted from those
        begun: dict[str, int] = defaultdict(int)
        for summary in watches:
            begun[summary.stream] += summary.began
        streams = _streams(db, span, stream, begun)
    return Summary(span.since, span.until, bucket, streams, watches)


@dataclass
class _Totals:
    began: int = 0
    first: float | None = None
    last: float | None = None
    joined: int = 0  # ends in the period whose begin was found
    on_s: float = 0.0
    longest_s: float = 0.0
    on_now: bool = False


def _watches_in_sql(db: Any, span: Period, filters: list[Any]) -> list[WatchSummary]:
    """The summary per watch from SQL aggregates: only the alerts that cross the period's edges come one by one."""
    totals: dict[tuple[str, str], _Totals] = defaultdict(_Totals)
    until, inside = span.until, [span.until] * 3
    params = [until, *inside, *inside, until, span.since, span.until, *filters]
    for name, alert, count, first, last, ended, on_s, longest, open_ in db.query(BEGUN_SQL, params):
        total = totals[(name, alert)]
        total.began, total.first, total.last, total.joined = int(count), first, last, int(ended)
        total.on_s, total.longest_s, total.on_now = float(on_s or 0.0), float(longest or 0.0), bool(open_)
    ended = int(db.query(END_COUNT_SQL, [span.since, span.until, *filters])[0][0])
    for _, name, alert, begin, end, duration in db.query(EARLIER_ALERTS_SQL, [span.since, span.since, *filters]):
        total = totals[(name, alert)]
        inside = _inside(_On(begin, end, duration), span.since, span.until)
        total.on_s += inside
        total.longest_s = max(total.longest_s, inside)
        total.on_now = total.on_now or end is None or end >= span.until
        total.joined += end is not None and span.since <= end < span.until
    if sum(total.joined for total in totals.values()) < ended:
        for name, alert, _, duration in db.query(ORPHAN_ENDS_SQL, [span.since, span.until, *filters]):
            total = totals[(name, alert)]
            total.on_s += float(duration or 0.0)
            total.longest_s = max(total.longest_s, float(duration or 0.0))
    return [
        WatchSummary(name, alert, t.began, round(t.on_s, 3), round(t.longest_s, 3), t.first, t.last, t.on_now)
        for (name, alert), t in sorted(totals.items())
    ]


def _spans(db: Any, span: Period, filters: list[Any]) -> dict[tuple[str, str], list[_On]]:
    """Every alert that meets the period, one by one, per watch (for buckets)."""
    alerts: dict[tuple[str, str], list[_On]] = defaultdict(list)
    earlier: set[str] = set()
    for alert_id, name, alert, begin, end, duration in db.query(EARLIER_ALERTS_SQL, [span.since, span.since, *filters]):
        earlier.add(alert_id)
        alerts[(name, alert)].append(_On(begin, end, duration))
    begins: dict[str, _On] = {}
    for alert_id, state, name, alert, t_wall, duration in db.query(ALERT_ROWS_SQL, [span.since, span.until, *filters]):
        if state == "begin":
            begins[alert_id] = on = _On(t_wall, None, None)  # open, unless its end comes in the period
            alerts[(name, alert)].append(on)
        elif alert_id in begins:
            begins[alert_id].end, begins[alert_id].length = t_wall, duration
        elif state == "end" and alert_id not in earlier:  # an end whose begin is gone (retention took it)
            length = float(duration or 0.0)
            alerts[(name, alert)].append(_On(t_wall - length, t_wall, length, orphan=True))
    for alert_id, _, _, _, end, duration in db.query(CROSSING_SQL, [span.since, span.until, span.until, *filters]):
        if end is not None and alert_id in begins:  # ended after the period: its length, for its share inside
            begins[alert_id].end, begins[alert_id].length = end, duration
    return alerts


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
    begun = sorted(on.begin for on in spans if span.since <= on.begin < span.until and not on.orphan)
    inside = [_inside(on, span.since, span.until) for on in spans]
    buckets = _buckets(spans, _bucket_edges(span, bucket)) if bucket is not None else []
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


def _buckets(spans: list[_On], edges: list[tuple[float, float]]) -> list[Bucket]:
    """Begins and seconds on per bucket; each alert visits only the buckets its span touches."""
    starts = [start for start, _ in edges]
    began, on_s = [0] * len(edges), [0.0] * len(edges)
    for on in spans:
        end = edges[-1][1] if on.end is None else on.end
        first = max(bisect.bisect_right(starts, on.begin) - 1, 0)
        last = max(bisect.bisect_left(starts, end), first + 1)
        for index in range(first, min(last, len(edges))):
            start, stop = edges[index]
            began[index] += start <= on.begin < stop and not on.orphan
            on_s[index] += _inside(on, start, stop)
    return [
        Bucket(start, count, round(seconds, 3)) for (start, _), count, seconds in zip(edges, began, on_s, strict=True)
    ]


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


def _streams(db: Any, span: Period, stream: str | None, begun: dict[str, int]) -> list[StreamSummary]:
    answers = {
        name: int(count) for name, count in db.query(ANSWER_COUNTS_SQL, [span.since, span.until, stream, stream])
    }
    gaps: dict[str, list[Gap]] = defaultdict(list)
    down_since: dict[str, tuple[float, str]] = {}
    before = db.query(STATES_BEFORE_SQL, [span.since, stream, stream])
    for name, t_wall, state in [*before, *db.query(STREAM_STATES_SQL, [span.since, span.until, stream, stream])]:
        if state in DOWN_STATES and name not in down_since:
            down_since[name] = (max(t_wall, span.since), state)
        elif state in UP_STATES and name in down_since:
            start, reason = down_since.pop(name)
            if t_wall > span.since:
                gaps[name].append(Gap(start, t_wall, reason))
    for name, (start, reason) in down_since.items():
        gaps[name].append(Gap(start, None, reason))
    summaries = []
    for name in sorted(set(answers) | {name for name, count in begun.items() if count} | set(gaps)):
        down = sum((gap.end if gap.end is not None else span.until) - gap.start for gap in gaps[name])
        summaries.append(StreamSummary(name, answers.get(name, 0), begun.get(name, 0), round(down, 3), gaps[name]))
    return summaries
