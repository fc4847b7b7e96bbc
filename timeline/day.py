"""The day as strips: for a period, one strip per stream (the standing answers, one segment per run of equal answers
from the moment it began to the moment the next one began, and the stream's gaps) and one strip per watch (its on
intervals), each segment citing its moment. What the day picture (timeline.day_picture) and the page's Day view
draw; read with SQL of its own and the summary's gaps (SQLite and PostgreSQL alike).

Bounded: a strip keeps at most `max_segments` segments (a stream's gaps at most a fifth of them). Past that, the
neighbours whose union is shortest merge (a merged segment keeps its first member's moment and text and counts its
members in `count`); the strip's `merged` says how many segments went into others. Ticks: times in this machine's
local time at a round step (a minute to a week), at most `MAX_TICKS`.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from timeline.period import Period
from timeline.recap import same_words
from timeline.summary import summarize

_HAS_THUMBNAIL = "EXISTS (SELECT 1 FROM thumbnails t WHERE t.moment_id = {a}.id)"
# the period's standing answers in each stream's order
STANDING_SQL = (
    "SELECT m.id, m.stream, m.t_wall, m.question, m.text, " + _HAS_THUMBNAIL.format(a="m") + " FROM moments m"
    " WHERE m.kind = 'answer' AND m.who = 'standing' AND m.t_wall >= ? AND m.t_wall < ?"
    " AND (CAST(? AS TEXT) IS NULL OR m.stream = ?) ORDER BY m.stream, m.t_wall, m.id"
)
# every alert on at some time in the period: begun before its end, not ended before its start
ALERTS_ON_SQL = (
    "SELECT b.id, b.stream, b.alert, b.question, b.t_wall, e.t_wall, " + _HAS_THUMBNAIL.format(a="b") + " FROM"
    " moments b LEFT JOIN moments e ON e.kind = 'alert' AND e.alert_id = b.alert_id AND e.state = 'end'"
    " WHERE b.kind = 'alert' AND b.state = 'begin' AND b.alert_id IS NOT NULL AND b.t_wall < ?"
    " AND (e.t_wall IS NULL OR e.t_wall >= ?) AND (CAST(? AS TEXT) IS NULL OR b.stream = ?) ORDER BY b.t_wall, b.id"
)
MAX_SEGMENTS = 500
MAX_TICKS = 12
TICK_STEPS = (60, 300, 600, 1800, 3600, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 2 * 86400, 7 * 86400)  # seconds


@dataclass(frozen=True)
class Segment:
    """A span of a strip, wall seconds inside the period. `kind`: on (a watch's alert), answer (a run of equal
    standing answers), gap (the stream down). `moment`: the row it cites (the alert's begin, the run's first answer;
    None for a gap); `thumbnail`: a row of it with a thumbnail, or None; `open`: still so at the period's end;
    `count`: answers in the run, or members of a merged segment."""

    kind: str
    start: float
    end: float
    text: str
    moment: int | None = None
    thumbnail: int | None = None
    open: bool = False
    count: int = 1


@dataclass(frozen=True)
class Strip:
    """One row of the picture: a stream's (`watch` None) or one watch's of a stream. `merged`: segments merged into
    others to keep within the bound (0: every one is shown)."""

    stream: str
    watch: str | None
    segments: list[Segment] = field(default_factory=list)
    merged: int = 0

    @property
    def label(self) -> str:
        return self.stream if self.watch is None else f"{self.stream} / {self.watch}"


@dataclass(frozen=True)
class Day:
    since: float
    until: float
    strips: list[Strip]
    ticks: list[tuple[float, str]]  # (wall seconds, local time label)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def day(db: Any, span: Period, stream: str | None = None, max_segments: int = MAX_SEGMENTS) -> Day:
    """The strips of `span` (see the module), of one stream when given. `db`: a backend reader (`query(sql,
    params)`). ValueError when `max_segments` is below 5."""
    if max_segments < 5:
        raise ValueError(f"invalid max_segments {max_segments}: expected at least 5")
    answers = _answer_runs(db, span, stream)
    gaps = {
        summary.stream: [
            Segment(
                "gap",
                gap.start,
                gap.end if gap.end is not None else span.until,
                f"stream down ({gap.reason})",
                open=gap.end is None,
            )
            for gap in summary.gaps
        ]
        for summary in summarize(db, span, stream=stream).streams
    }
    watches = _watch_intervals(db, span, stream)
    strips = []
    for name in sorted(set(answers) | set(gaps) | {name for name, _ in watches}):
        stream_gaps, merged_gaps = bounded(gaps.get(name, []), max_segments // 5)
        runs, merged_runs = bounded(answers.get(name, []), max_segments - len(stream_gaps))
        segments = sorted(runs + stream_gaps, key=lambda s: (s.start, s.kind))
        strips.append(Strip(name, None, segments, merged_gaps + merged_runs))
        for (seen_on, watch), intervals in sorted(watches.items()):
            if seen_on == name:
                kept, merged = bounded(intervals, max_segments)
                strips.append(Strip(name, watch, kept, merged))
    return Day(span.since, span.until, strips, ticks(span.since, span.until))


def _answer_runs(db: Any, span: Period, stream: str | None) -> dict[str, list[Segment]]:
    """Per stream, its standing answers as runs of equal ones (timeline.recap's comparison): a run lasts from its
    first answer to the next run's first (the last one to its last answer)."""
    rows: dict[str, list[list[Any]]] = {}
    for row in db.query(STANDING_SQL, [span.since, span.until, stream, stream]):
        runs = rows.setdefault(row[1] or "", [])
        last = runs[-1][-1] if runs else None
        if last is not None and last[3] == row[3] and same_words(last[4]) == same_words(row[4]):
            runs[-1].append(row)
        else:
            runs.append([row])
    out = {}
    for name, runs in rows.items():
        ends = [run[0][2] for run in runs[1:]] + [runs[-1][-1][2]]
        out[name] = [
            Segment(
                "answer",
                run[0][2],
                end,
                " ".join((run[0][4] or "").split()),
                moment=run[0][0],
                thumbnail=next((row[0] for row in run if row[5]), None),
                count=len(run),
            )
            for run, end in zip(runs, ends, strict=True)
        ]
    return out


def _watch_intervals(db: Any, span: Period, stream: str | None) -> dict[tuple[str, str], list[Segment]]:
    """Per (stream, watch), the wall spans its alerts were on inside the period, each citing its begin."""
    out: dict[tuple[str, str], list[Segment]] = {}
    params = [span.until, span.since, stream, stream]
    for row_id, name, alert, question, begin, end, has_thumb in db.query(ALERTS_ON_SQL, params):
        on = end is None or end >= span.until
        segment = Segment(
            "on",
            max(begin, span.since),
            span.until if on else end,
            f"{alert} on" + (f": {question}" if question else ""),
            moment=row_id,
            thumbnail=row_id if has_thumb else None,
            open=end is None,
        )
        out.setdefault((name or "", alert), []).append(segment)
    return out


def bounded(segments: list[Segment], most: int) -> tuple[list[Segment], int]:
    """`segments` (in time order) with at most `most` left: the neighbours whose union is shortest merge first.
    Returns the segments and how many were merged into others."""
    extra = len(segments) - max(most, 1)
    if extra <= 0:
        return segments, 0
    unions = sorted(range(len(segments) - 1), key=lambda i: (segments[i + 1].end - segments[i].start, i))
    joined = set(unions[:extra])  # boundary i joins segment i and i + 1
    out: list[Segment] = []
    for index, segment in enumerate(segments):
        if index - 1 in joined:
            first = out[-1]
            out[-1] = replace(
                first,
                end=max(first.end, segment.end),
                open=first.open or segment.open,
                count=first.count + segment.count,
                thumbnail=first.thumbnail if first.thumbnail is not None else segment.thumbnail,
            )
        else:
            out.append(segment)
    return out, extra


def ticks(since: float, until: float, most: int = MAX_TICKS) -> list[tuple[float, str]]:
    """Round local times inside [since, until]: the smallest step of TICK_STEPS giving at most `most` ticks,
    labelled HH:MM (steps under a day) or MM-DD (a day or more)."""
    step = next((s for s in TICK_STEPS if (until - since) / s <= most), TICK_STEPS[-1])
    offset = time.localtime(since).tm_gmtoff
    first = (since + offset) // step * step - offset
    if first < since:
        first += step
    out = []
    t = first
    while t <= until and len(out) < most + 1:  # a DST change inside the period shifts the later labels by an hour
        out.append((t, time.strftime("%m-%d" if step >= 86400 else "%H:%M", time.localtime(t))))
        t += step
    return out
