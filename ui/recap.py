"""The History tab's Recap view: what a person who was away reads first. The period's lines (timeline.recap: its
alerts, the standing question's answers collapsed into runs, a person's questions, the streams' gaps) in time
order, each with its time span, its stream, its text, how many answers a run holds, the moments it cites and, for
those the recap gives one, the moment's thumbnail (an inline `data:` JPEG). Pure: strings from a recap (anything
with the attributes of `timeline.recap.Recap`: since, until, lines, left_out, message, summary; each line kind,
stream, start, end, text, count, question, moments, thumbnail), under the period's counts (anything with the
attributes of `timeline.summary.Summary`: per watch how many times it began and how long it was on, per stream its
answers, alerts and time down). Both come from a `RecapSource` the app passes in (ui/ does not import app/ nor
timeline/).

Every text is escaped; nothing is fetched from anywhere.
"""

from __future__ import annotations

import html
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from bus.clock import clock
from ui.day import PERIODS, message_html, shown_text
from ui.history import ALL, THUMB_WIDTH, HistoryUnavailable, jpeg_src, local_time

logger = logging.getLogger(__name__)

PROMPT = '<p class="recap-empty"><i>Pick a period and a stream, then Recap: what happened, in a few lines.</i></p>'
KIND_NAMES = {"alert": "alert", "answers": "answer", "asked": "asked", "gap": "stream down"}
CSS = """
.recap-view { font-size: 0.9em; }
.recap-lines { list-style: none; padding: 0; margin: 0; }
.recap-line { display: flex; gap: 10px; align-items: flex-start; padding: 6px 0; border-bottom: 1px solid #e5e7eb; }
.recap-line img { border-radius: 4px; flex: none; }
.recap-when { color: #475569; white-space: nowrap; }
.recap-kind { font-weight: 600; }
.recap-alert .recap-kind { color: #c2410c; }
.recap-gap .recap-kind { color: #6b7280; }
.recap-summary { background: #f1f5f9; border-radius: 4px; padding: 6px 8px; }
.recap-counts { border-collapse: collapse; margin: 4px 0 10px; }
.recap-counts th, .recap-counts td { border-bottom: 1px solid #e5e7eb; padding: 3px 10px 3px 0; text-align: left; }
"""


class RecapSource(Protocol):
    """What the Recap view needs of the timeline. `recap_back` may raise `HistoryUnavailable`, or ValueError for a
    period the timeline cannot answer (its message says why)."""

    def recap_back(self, seconds: float, stream: str | None = None) -> Any:  # a timeline.recap.Recap
        ...

    def summary_back(self, seconds: float, stream: str | None = None) -> Any:  # a timeline.summary.Summary
        ...

    def thumbnails(self, row_ids: Sequence[int]) -> Mapping[int, bytes]:  # the JPEGs of those rows that have one
        ...


def recap_view(source: RecapSource | None, period: str, stream: str | None) -> str:
    """The Recap button: the period's recap as HTML, or a message saying why there is none; never raises."""
    if source is None:
        return message_html("The timeline is off: there is nothing to recap.")
    if period not in PERIODS:
        return message_html(f"unknown period {period!r}; pick one of {', '.join(PERIODS)}")
    which = None if stream in (None, "", ALL) else stream
    try:
        result = source.recap_back(PERIODS[period], which)
        counts = source.summary_back(PERIODS[period], which)
        wanted = [line.thumbnail for line in result.lines if line.thumbnail is not None]
        jpegs = source.thumbnails(wanted) if wanted else {}
    except (HistoryUnavailable, ValueError) as err:
        return message_html(f"cannot recap the period: {err}")
    except Exception as err:  # a bug or an unexpected I/O error: logged with its traceback, shown as a message
        logger.exception("the recap view failed")
        return message_html(f"the recap failed: {type(err).__name__}: {err}")
    return counts_html(counts) + recap_html(result, jpegs)


def counts_html(summary: Any) -> str:
    """The period's counts: a row per watch (how many times it began, its time on in all and its longest, whether
    it is on now), then a row per stream (its answers, alerts begun, time down); nothing when there is none."""
    rows = [
        f'<tr data-watch="{html.escape(watch.watch)}"><td>watch {html.escape(shown_text(watch.watch))}</td>'
        f"<td>{html.escape(shown_text(watch.stream))}</td><td>began {int(watch.began)} time(s)</td>"
        f"<td>on {clock(watch.on_s)} (longest {clock(watch.longest_s)})</td>"
        f"<td>{'on now' if watch.on_now else ''}</td></tr>"
        for watch in summary.watches
    ] + [
        f'<tr data-stream="{html.escape(stream.stream)}"><td>stream</td><td>{html.escape(shown_text(stream.stream))}'
        f"</td><td>{int(stream.answers)} answer(s)</td><td>{int(stream.alerts)} alert(s) begun</td>"
        f"<td>down {clock(stream.down_s)}</td></tr>"
        for stream in summary.streams
    ]
    return f'<table class="recap-counts">{"".join(rows)}</table>' if rows else ""


def recap_html(result: Any, jpegs: Mapping[int, bytes]) -> str:
    """The recap's message, the model's paragraph where there is one (marked as its), then a line per recap line
    (`[data-kind]`, `[data-moments]`: the timeline ids it cites); `jpegs`: the thumbnails by row id."""
    head = f'<p class="recap-head">{html.escape(shown_text(result.message))}</p>'
    summary = ""
    if result.summary:
        summary = (
            f'<p class="recap-summary"><b>Written by the model from these lines:</b> '
            f"{html.escape(shown_text(result.summary))}</p>"
        )
    if not result.lines:
        return f'<div class="recap-view">{head}{summary}</div>'
    lines = "".join(_line(line, jpegs) for line in result.lines)
    return f'<div class="recap-view">{head}{summary}<ul class="recap-lines">{lines}</ul></div>'


def _line(line: Any, jpegs: Mapping[int, bytes]) -> str:
    kind = html.escape(line.kind)
    image = ""
    jpeg = jpegs.get(line.thumbnail) if line.thumbnail is not None else None
    if jpeg:
        image = f'<img src="{jpeg_src(jpeg)}" alt="moment {int(line.thumbnail)}" width="{THUMB_WIDTH}">'
    count = f" (x{int(line.count)})" if line.count > 1 else ""
    question = f"<i>{html.escape(shown_text(line.question))}</i> " if line.kind == "asked" and line.question else ""
    moments = ",".join(str(int(moment)) for moment in line.moments)
    return (
        f'<li class="recap-line recap-{kind}" data-kind="{kind}" data-moments="{moments}">{image}<div>'
        f'<span class="recap-when">{html.escape(when(line.start, line.end))}</span> '
        f'<span class="recap-stream">{html.escape(shown_text(line.stream))}</span> '
        f'<span class="recap-kind">{KIND_NAMES.get(line.kind, kind)}</span>{count}<br>'
        f'{question}<span class="recap-text">{html.escape(shown_text(line.text))}</span></div></li>'
    )


def when(start: float, end: float | None) -> str:
    """A line's time span in local time: its start's date and time, then its end's time (its date too when it is
    another day); `end` None: "still so"."""
    if end is None:
        return f"{local_time(start)} - still so"
    if end == start:
        return local_time(start)
    same_day = time.localtime(start)[:3] == time.localtime(end)[:3]
    return f"{local_time(start)} - {time.strftime('%H:%M:%S', time.localtime(end)) if same_day else local_time(end)}"
