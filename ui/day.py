"""The History tab's Day view: the day as strips (a stream's answer runs and gaps, a watch's on intervals) drawn as
HTML, and what one clicked segment shows: its moment's thumbnail (an inline `data:` JPEG) and its text. Pure:
strings from a day (anything with the attributes of `timeline.day.Day`: since, until, strips, ticks; each strip
stream, watch, label, segments, merged; each segment kind, start, end, text, moment, thumbnail, open, count). The
day itself comes from a `DaySource` the app passes in (ui/ does not import app/ nor timeline/).

Every text is escaped; nothing is fetched from anywhere (no remote image, no script of its own beyond the click
handler the view's HTML component is given).
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from ui.history import ALL, THUMB_WIDTH, HistoryUnavailable, jpeg_src, local_time
from ui.upload_names import hide_upload_folder

logger = logging.getLogger(__name__)

PERIODS: dict[str, float] = {
    "last 1 h": 3600.0,
    "last 6 h": 6 * 3600.0,
    "last 1 day": 86400.0,
    "last 7 days": 7 * 86400.0,
}
DEFAULT_PERIOD = "last 1 day"
MAX_STRIPS = 40
SEGMENT_KEY = re.compile(r"(\d{1,3}):(\d{1,4})")
KIND_NAMES = {"on": "watch on", "answer": "answer", "gap": "stream down"}
PROMPT = '<p class="day-empty"><i>Pick a period and a stream, then Draw: a strip per stream and per watch.</i></p>'
DETAIL_PROMPT = '<p class="day-detail-empty"><i>Click a segment to see its moment.</i></p>'
# the view's click handler: which segment (its "strip:segment" key) was clicked, to the Python side
CLICK_JS = (
    "element.addEventListener('click', (event) => {"
    " const seg = event.target.closest('[data-seg]');"
    " if (seg) { trigger('click', { seg: seg.dataset.seg }); } });"
)
CSS = """
.day-view { font-size: 0.85em; }
.day-row { display: flex; align-items: center; margin: 3px 0; }
.day-label { width: 180px; flex: none; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.day-track { position: relative; flex: 1; height: 16px; background: #f1f5f9; border-radius: 3px; }
.day-seg { position: absolute; top: 0; height: 16px; min-width: 3px; cursor: pointer; }
.day-seg:hover { outline: 2px solid #0f172a; z-index: 2; }
.day-on { background: #f97316; }
.day-answer-0 { background: #60a5fa; border-left: 1px solid #0f172a; }
.day-answer-1 { background: #1d4ed8; border-left: 1px solid #0f172a; }
.day-gap { background: #9ca3af; top: 4px; height: 8px; z-index: 1; }
.day-axis { position: relative; height: 18px; margin-left: 180px; }
.day-tick { position: absolute; transform: translateX(-50%); color: #475569; }
.day-legend span.day-key { display: inline-block; width: 12px; height: 10px; margin: 0 4px 0 12px; }
.day-detail img { border-radius: 4px; display: block; margin-bottom: 4px; }
"""


class DaySource(Protocol):
    """What the Day view needs of the timeline. `day_back` may raise `HistoryUnavailable`, or ValueError for a
    period the timeline cannot answer (its message says why)."""

    def day_back(self, seconds: float, stream: str | None = None) -> Any:  # a timeline.day.Day
        ...

    def thumbnails(self, row_ids: Sequence[int]) -> Mapping[int, bytes]:  # the JPEGs of those rows that have one
        ...


def message_html(message: str) -> str:
    return f'<p class="day-message">{html.escape(message)}</p>'


def day_view(source: DaySource | None, period: str, stream: str | None) -> tuple[str, Any]:
    """The Draw button: the strips' HTML and the day they show (None with a message instead); never raises."""
    if source is None:
        return message_html("The timeline is off: there is no day to draw."), None
    if period not in PERIODS:
        return message_html(f"unknown period {period!r}; pick one of {', '.join(PERIODS)}"), None
    try:
        result = source.day_back(PERIODS[period], None if stream in (None, "", ALL) else stream)
    except (HistoryUnavailable, ValueError) as err:
        return message_html(f"cannot draw the day: {err}"), None
    except Exception as err:  # a bug or an unexpected I/O error: logged with its traceback, shown as a message
        logger.exception("the day view failed")
        return message_html(f"drawing the day failed: {type(err).__name__}: {err}"), None
    return strips_html(result), result


def strips_html(result: Any) -> str:
    """A row per strip (at most MAX_STRIPS), each segment a `[data-seg="strip:segment"]` span placed by percent of
    the period; the local time ticks below; a legend."""
    head = f"{html.escape(local_time(result.since))} to {html.escape(local_time(result.until))} (local time)"
    if not result.strips:
        return f'<div class="day-view"><p class="day-head">{head}</p>{message_html("Nothing in this period.")}</div>'
    rows = [_row(index, strip, result) for index, strip in enumerate(result.strips[:MAX_STRIPS])]
    more = len(result.strips) - MAX_STRIPS
    if more > 0:
        rows.append(message_html(f"{more} more strip(s) not drawn: pick one stream"))
    ticks = "".join(
        f'<span class="day-tick" style="left:{_percent(result, t):.3f}%">{html.escape(label)}</span>'
        for t, label in result.ticks
    )
    legend = "".join(
        f'<span class="day-key day-{css}"></span>{name}'
        for css, name in (("on", "watch on"), ("answer-0", "answer (each change: the other blue)"), ("gap", "down"))
    )
    return (
        f'<div class="day-view"><p class="day-head">{head}</p>{"".join(rows)}'
        f'<div class="day-axis">{ticks}</div><p class="day-legend">{legend}</p></div>'
    )


def _row(index: int, strip: Any, result: Any) -> str:
    merged = f" (+{int(strip.merged)} merged)" if strip.merged else ""
    label = html.escape(strip.label + merged)
    spans, runs = [], 0
    for number, segment in enumerate(strip.segments):
        css = segment.kind
        if segment.kind == "answer":
            css, runs = f"answer-{runs % 2}", runs + 1
        left = _percent(result, segment.start)
        width = max(_percent(result, segment.end) - left, 0.0)
        spans.append(
            f'<span class="day-seg day-{css}" data-seg="{index}:{number}" data-kind="{html.escape(segment.kind)}"'
            f' style="left:{left:.3f}%;width:{width:.3f}%" title="{html.escape(_title(segment))}"></span>'
        )
    return (
        f'<div class="day-row" data-strip="{index}"><span class="day-label" title="{label}">{label}</span>'
        f'<div class="day-track">{"".join(spans)}</div></div>'
    )


def _percent(result: Any, t: float) -> float:
    return 100.0 * (t - result.since) / max(result.until - result.since, 1e-9)


def _title(segment: Any) -> str:
    return f"{local_time(segment.start)}: {shown_text(segment.text)}"


def shown_text(text: str | None) -> str:
    """The text as the view shows it: without the upload folder's path, nor control characters (a NUL reads as
    nothing in the page's text but as U+FFFD in an attribute)."""
    return "".join(c for c in hide_upload_folder(text or "") if c.isprintable() or c == "\n")


def segment_at(result: Any, key: str | None) -> Any:
    """The segment a click named (`strip:segment`), or None for a key that names none."""
    match = SEGMENT_KEY.fullmatch(key or "")
    if result is None or match is None:
        return None
    strip, number = int(match.group(1)), int(match.group(2))
    if strip >= min(len(result.strips), MAX_STRIPS) or number >= len(result.strips[strip].segments):
        return None
    return result.strips[strip].segments[number]


def moment_html(source: DaySource | None, result: Any, key: str | None) -> str:
    """A clicked segment: its moment's thumbnail (when it has one), when it was, what it says; never raises."""
    segment = segment_at(result, key)
    if segment is None:
        return DETAIL_PROMPT
    image = ""
    if segment.thumbnail is not None and source is not None:
        try:
            jpeg = source.thumbnails([segment.thumbnail]).get(segment.thumbnail)
        except HistoryUnavailable as err:
            jpeg, image = None, message_html(f"cannot read its thumbnail: {err}")
        if jpeg:
            src = jpeg_src(jpeg)
            image = f'<img src="{src}" alt="moment {int(segment.thumbnail)}" width="{THUMB_WIDTH}">'
    until = "now (still so)" if segment.open else local_time(segment.end)
    counted = "answers" if segment.kind == "answer" else "merged"
    count = f" ({int(segment.count)} {counted})" if segment.count > 1 else ""
    cites = f" (moment {int(segment.moment)})" if segment.moment is not None else ""
    return (
        f'<div class="day-detail" data-moment="{"" if segment.moment is None else int(segment.moment)}">{image}'
        f"<b>{KIND_NAMES.get(segment.kind, html.escape(segment.kind))}</b>{count}{cites}: "
        f"{html.escape(local_time(segment.start))} to {html.escape(until)}"
        f'<br><span class="day-text">{html.escape(shown_text(segment.text))}</span></div>'
    )
