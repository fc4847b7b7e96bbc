"""A recap of a period: what a person who was away reads first. Short, ordered, every line citing its moments.

Lines, in wall-time order:
- `alert`: a watch's alert that began in the period (or was on when it began), with how long it was on and the
  moment of its begin (its thumbnail, for the first `max_thumbnails` of them);
- `answers`: a run of the standing question's answers on one stream that say the same thing (compared without
  case, spacing and end punctuation), as one line with its time span and count, citing its first and last moment;
  a person's answered question is a line of its own;
- `gap`: a stream down (see timeline.summary).
At most `max_lines` lines: the newest are kept and `left_out` says how many older ones were not.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from timeline.period import Period
from timeline.summary import EARLIER_ALERTS_SQL, summarize

MAX_LINES = 200
MAX_THUMBNAILS = 20
DEFAULT_LINES = 50
DEFAULT_THUMBNAILS = 8
_END_PUNCTUATION = re.compile(r"[\s.!?;:,]+$")

_ANSWER = "m.id, m.stream, m.t_wall, m.start_s, m.end_s, m.question, m.text, m.who"
_HAS_THUMBNAIL = "EXISTS (SELECT 1 FROM thumbnails t WHERE t.moment_id = {a}.id)"
_PERIOD = "m.kind = 'answer' AND m.t_wall >= ? AND m.t_wall < ? AND (CAST(? AS TEXT) IS NULL OR m.stream = ?)"
ASKED_SQL = (  # a person's answered questions (and any answer not of the standing question)
    f"SELECT {_ANSWER}, {_HAS_THUMBNAIL.format(a='m')} FROM moments m"
    f" WHERE {_PERIOD} AND COALESCE(m.who, '') <> 'standing' ORDER BY m.t_wall, m.id"
)
STANDING_SQL = (  # the standing question's answers, in each stream's order (thumbnails: looked up for the lines kept)
    f"SELECT {_ANSWER}, 0 FROM moments m WHERE {_PERIOD} AND m.who = 'standing' ORDER BY m.stream, m.t_wall, m.id"
)
_ALERT_WHERE = (
    " WHERE b.kind = 'alert' AND b.state = 'begin' AND b.alert_id IS NOT NULL AND b.t_wall < ?"
    " AND (e.t_wall IS NULL OR e.t_wall >= ?) AND (CAST(? AS TEXT) IS NULL OR b.stream = ?)"
    " AND (CAST(? AS TEXT) IS NULL OR b.alert = ?)"
)
_END_OF = " LEFT JOIN moments e ON e.kind = 'alert' AND e.alert_id = b.alert_id AND e.state = 'end'"
_ALERT_LINE = (
    "SELECT b.id, b.stream, b.alert, b.question, b.t_wall, b.start_s, e.t_wall, e.duration_s, e.text,"
    f" {_HAS_THUMBNAIL.format(a='b')} FROM moments b{_END_OF}{_ALERT_WHERE}"
)
ALERT_LINES_SQL = _ALERT_LINE + " ORDER BY b.t_wall, b.id"  # every alert that meets the period
NEWEST_ALERTS_SQL = _ALERT_LINE + " ORDER BY b.t_wall DESC, b.id DESC LIMIT ?"  # the newest of them
ANSWERS_SQL = (  # every answer of the period, in order
    f"SELECT {_ANSWER}, {_HAS_THUMBNAIL.format(a='m')} FROM moments m WHERE {_PERIOD} ORDER BY m.t_wall, m.id"
)
ALERTS_BEGUN_SQL = (  # how many alerts began in the period (read in the index), for what was left out
    "SELECT count(*) FROM moments m WHERE m.kind = 'alert' AND m.t_wall >= ? AND m.t_wall < ? AND m.state = 'begin'"
    " AND m.alert_id IS NOT NULL AND (CAST(? AS TEXT) IS NULL OR m.stream = ?)"
    " AND (CAST(? AS TEXT) IS NULL OR m.alert = ?)"
)


@dataclass(frozen=True)
class RecapLine:
    """One line of a recap. `start`/`end`: wall seconds (`end` None: still so at the period's end);
    `start_s`/`end_s`: the stream's seconds, where known (a run: when its first and its last answer were given);
    `moments`: the timeline ids it cites (first, last); `thumbnail`: the id whose thumbnail shows it
    (GET /api/v1/history/{id}/thumbnail), or None; `count`: answers in a run, 1 otherwise."""

    kind: str  # alert | answers | asked | gap
    stream: str
    start: float
    end: float | None
    text: str
    count: int = 1
    question: str | None = None
    watch: str | None = None
    start_s: float | None = None
    end_s: float | None = None
    moments: list[int] = field(default_factory=list)
    thumbnail: int | None = None


@dataclass(frozen=True)
class Recap:
    since: float
    until: float
    lines: list[RecapLine]
    left_out: int  # older lines not shown (past max_lines)
    message: str  # one sentence: what the period held, or that it held nothing
    summary: str | None = None  # a paragraph the model wrote from these lines, marked as its own; never instead

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def same_words(text: str | None) -> str:
    """The text as runs compare it: lower case, single spaces, no end punctuation."""
    return _END_PUNCTUATION.sub("", " ".join((text or "").lower().split()))


def recap(
    db: Any,
    span: Period,
    stream: str | None = None,
    watch: str | None = None,
    max_lines: int = DEFAULT_LINES,
    max_thumbnails: int = DEFAULT_THUMBNAILS,
) -> Recap:
    """The recap of `span` (see the module), of one stream and/or one watch when given. ValueError when a limit
    is out of range (1..MAX_LINES lines, 0..MAX_THUMBNAILS thumbnails)."""
    if not 1 <= max_lines <= MAX_LINES:
        raise ValueError(f"invalid max_lines {max_lines}: expected 1 to {MAX_LINES}")
    if not 0 <= max_thumbnails <= MAX_THUMBNAILS:
        raise ValueError(f"invalid max_thumbnails {max_thumbnails}: expected 0 to {MAX_THUMBNAILS}")
    lines, alerts_left_out = _alert_lines(db, span, stream, watch, max_lines)
    if watch is None:
        lines += _answer_lines(db, span, stream)
        for summary in summarize(db, span, stream=stream).streams:
            lines += [
                RecapLine("gap", summary.stream, gap.start, gap.end, f"stream down ({gap.reason})")
                for gap in summary.gaps
            ]
    lines.sort(key=lambda line: (line.start, line.kind, line.stream))
    left_out = max(len(lines) - max_lines, 0)
    lines = _with_run_thumbnails(db, lines[left_out:])
    left_out += alerts_left_out
    lines = _thumbnails_for(lines, max_thumbnails)
    return Recap(span.since, span.until, lines, left_out, _message(lines, left_out, span))


def _alert_lines(
    db: Any, span: Period, stream: str | None, watch: str | None, limit: int
) -> tuple[list[RecapLine], int]:
    """The newest `limit` alert lines, and how many older ones were not read."""
    lines = []
    params = [span.until, span.since, stream, stream, watch, watch]
    for row_id, name, alert, question, begin, start_s, end, duration, end_text, has_thumb in db.query(
        NEWEST_ALERTS_SQL, [*params, limit]
    ):
        if end is None:
            text = f"{alert}: on since it began"
        else:
            text = f"{alert}: on for {_duration(duration if duration is not None else end - begin)}"
            reason = re.search(r"\(([^()]*)\)$", end_text or "")
            text += f" (ended: {reason.group(1)})" if reason else ""
        lines.append(
            RecapLine(
                "alert",
                name or "",
                begin,
                end,
                text,
                question=question,
                watch=alert,
                start_s=start_s,
                end_s=start_s + duration if start_s is not None and duration is not None else None,
                moments=[row_id],
                thumbnail=row_id if has_thumb else None,
            )
        )
    if len(lines) < limit:
        return lines[::-1], 0
    begun = db.query(ALERTS_BEGUN_SQL, [span.since, span.until, stream, stream, watch, watch])[0][0]
    earlier = db.query(EARLIER_ALERTS_SQL, [span.since, span.since, stream, stream, watch, watch])
    return lines[::-1], max(int(begun) + len(earlier) - len(lines), 0)


def _answer_lines(db: Any, span: Period, stream: str | None) -> list[RecapLine]:
    """The standing question's answers as runs per stream (and question); a person's answers one line each."""
    params = [span.since, span.until, stream, stream]
    lines = [_run_line("asked", [row], 1) for row in db.query(ASKED_SQL, params)]
    first = last = None
    count = 0
    for row in db.query(STANDING_SQL, params):
        same = last is not None and row[1] == last[1] and row[5] == last[5]
        if same and (row[6] == last[6] or _continues(first, row)):  # (the same text: no need to compare words)
            last, count = row, count + 1
            continue
        if first is not None:
            lines.append(_run_line("answers", [first, last], count))
        first, last, count = row, row, 1
    if first is not None:
        lines.append(_run_line("answers", [first, last], count))
    return lines


def _with_run_thumbnails(db: Any, lines: list[RecapLine]) -> list[RecapLine]:
    """Each run's thumbnail: its first answer's, else its last's (looked up for the lines kept only)."""
    wanted = [moment for line in lines if line.kind == "answers" for moment in line.moments]
    if not wanted:
        return lines
    marks = ", ".join("?" * len(wanted))
    found = {row[0] for row in db.query(f"SELECT moment_id FROM thumbnails WHERE moment_id IN ({marks})", wanted)}
    return [
        RecapLine(**{**asdict(line), "thumbnail": next((m for m in line.moments if m in found), None)})
        if line.kind == "answers"
        else line
        for line in lines
    ]


def _continues(start: Any, row: Any) -> bool:
    """Whether `row` says what the run begun at `start` says (same stream and question, same words)."""
    return start[1] == row[1] and start[5] == row[5] and same_words(start[6]) == same_words(row[6])


def _run_line(kind: str, run: list[Any], count: int) -> RecapLine:
    """A run of `count` answers from its first and last row (one row: a run of one)."""
    first, last = run[0], run[-1]
    with_thumbnail = next((row[0] for row in run if row[8]), None)
    return RecapLine(
        kind,
        first[1] or "",
        first[2],
        last[2],
        " ".join((last[6] or "").split()),
        count=count,
        question=first[5],
        start_s=first[4],  # the stream times the run's first and last answer were given
        end_s=last[4],
        moments=[first[0]] if first[0] == last[0] else [first[0], last[0]],
        thumbnail=with_thumbnail,
    )


def _thumbnails_for(lines: list[RecapLine], limit: int) -> list[RecapLine]:
    """Keeps the thumbnails of the first `limit` alert lines, then of other lines while room is left."""
    kept, shown = [], 0
    for prefer in ("alert", None):
        for index, line in enumerate(lines):
            if line.thumbnail is None or (prefer and line.kind != prefer) or (not prefer and line.kind == "alert"):
                continue
            if shown < limit:
                kept.append(index)
                shown += 1
    keep = set(kept)
    return [
        line if line.thumbnail is None or index in keep else _without_thumbnail(line)
        for index, line in enumerate(lines)
    ]


def _without_thumbnail(line: RecapLine) -> RecapLine:
    return RecapLine(**{**asdict(line), "thumbnail": None})


def _message(lines: list[RecapLine], left_out: int, span: Period) -> str:
    period = f"{_local(span.since)} to {_local(span.until)}"
    if not lines:
        return f"Nothing in the timeline from {period}: no alert, no answer, no gap."
    alerts = sum(1 for line in lines if line.kind == "alert")
    answers = sum(line.count for line in lines if line.kind in ("answers", "asked"))
    gaps = sum(1 for line in lines if line.kind == "gap")
    counted = f"{alerts} alert(s), {answers} answer(s), {gaps} gap(s)"
    more = f" ({left_out} older line(s) left out)" if left_out else ""
    return f"From {period}: {counted} in {len(lines)} line(s){more}."


def _local(t_wall: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t_wall))


def _duration(seconds: float) -> str:
    """12 s, 4 min 5 s, 2 h 3 min."""
    whole = int(round(max(seconds, 0.0)))
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


def recap_text(result: Recap) -> str:
    """The recap as short lines for a terminal or a phone's notification: `14:03-14:20 door: ...`."""
    out = [result.message]
    for line in result.lines:
        when = _clock(line.start) + (f"-{_clock(line.end)}" if line.end is not None and line.end != line.start else "")
        count = f" (x{line.count})" if line.count > 1 else ""
        out.append(f"{when} {line.stream}: {line.text}{count}")
    return "\n".join(out)


def _clock(t_wall: float) -> str:
    return time.strftime("%H:%M", time.localtime(t_wall))
