"""The History tab's content: what the timeline (the assistant's long memory on disk) holds, searched by words,
stream and age. Pure: HTML strings from moments; the search itself is a `HistorySource` passed in by the app
(ui/ does not import app/), called on the Gradio handler's thread, never on the model worker.

A moment is anything with the attributes of `timeline.Moment`: id, kind, stream, t_wall (seconds since the
epoch), start_s/end_s (stream seconds), question, text, who, alert, has_thumbnail.
"""

from __future__ import annotations

import base64
import html
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from bus.clock import span
from ui.upload_names import hide_upload_folder

logger = logging.getLogger(__name__)

ALL = "all streams"
PERIODS: dict[str, float | None] = {  # the time filter: label -> seconds back (None: everything kept)
    "last 1 h": 3600.0,
    "last 6 h": 6 * 3600.0,
    "last 1 day": 86400.0,
    "last 7 days": 7 * 86400.0,
    "all": None,
}
DEFAULT_PERIOD = "last 1 day"
LIMIT = 50  # rows shown at most
THUMB_WIDTH = 160  # pixels: the timeline's thumbnails are this wide already
OFF_MESSAGE = (
    'The timeline is off (`--timeline ""`): nothing is kept to search. Start the assistant without '
    '`--timeline ""` to keep its answers, alerts and stream events on disk.'
)
TABLE_CSS = """
.history-table { border-collapse: collapse; width: 100%; font-size: 0.9em; }
.history-table th, .history-table td { border-bottom: 1px solid #e5e7eb; padding: 4px 8px; text-align: left;
  vertical-align: top; }
.history-table img { display: block; border-radius: 4px; }
"""


class HistoryUnavailable(Exception):
    """The timeline cannot be read now (missing, locked, damaged); the message says why."""


class HistorySource(Protocol):
    """What the page needs of the timeline. Each may raise `HistoryUnavailable`."""

    def search(
        self, text: str | None, since_s: float | None, stream: str | None, limit: int
    ) -> Sequence[Any]:  # moments, best first
        ...

    def thumbnail(self, row_id: int) -> bytes | None:  # a JPEG, or None
        ...

    def thumbnails(self, row_ids: Sequence[int]) -> Mapping[int, bytes]:  # the JPEGs of those rows that have one
        ...


def local_time(t_wall: float) -> str:
    """2024-05-01 14:03:12 (this machine's local time)."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t_wall))


def jpeg_src(jpeg: bytes) -> str:
    """A JPEG as an inline `data:` image source (nothing to serve or fetch)."""
    return "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")


def what(moment: Any) -> str:
    """The row's text cell: the question, then the answer / alert / stream message."""
    parts = []
    if moment.question:
        parts.append(f"<i>{html.escape(moment.question)}</i>")
    if moment.kind == "alert" and moment.alert:
        parts.append(f"<b>alert {html.escape(moment.alert)}</b>")
    if moment.text:
        parts.append(html.escape(hide_upload_folder(moment.text)))
    return "<br>".join(parts) or "-"


def history_html(moments: Sequence[Any], thumbs: Mapping[int, str | None] | None = None) -> str:
    """A table of `moments` in the order given (best or newest first): thumbnail (`thumbs`: image sources by row
    id), local time, stream, stream-time span, who, question and answer/alert text."""
    if not moments:
        return '<p class="history-empty"><i>Nothing found.</i></p>'
    rows = []
    for m in moments:
        src = (thumbs or {}).get(m.id)
        image = f'<img src="{src}" alt="moment {m.id}" width="{THUMB_WIDTH}">' if src else "-"
        rows.append(
            f'<tr class="history-row" data-row-id="{int(m.id)}" data-kind="{html.escape(m.kind)}">'
            f"<td>{image}</td><td>{local_time(m.t_wall)}</td><td>{html.escape(m.stream or '-')}</td>"
            f"<td>{span(m.start_s, m.end_s)}</td><td>{html.escape(m.who or '-')}</td><td>{what(m)}</td></tr>"
        )
    head = "".join(f"<th>{h}</th>" for h in ("thumbnail", "time", "stream", "stream time", "who", "what"))
    return f'<table class="history-table"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def message_html(message: str) -> str:
    return f'<p class="history-message">{html.escape(message)}</p>'


def search_html(source: HistorySource | None, text: str, stream: str | None, period: str) -> str:
    """The Search button: the results table, or a message (timeline off, unreadable, failed); never raises."""
    if source is None:
        return message_html(OFF_MESSAGE)
    if period not in PERIODS:
        return message_html(f"unknown time filter {period!r}; pick one of {', '.join(PERIODS)}")
    query = (text or "").strip() or None
    try:
        moments = source.search(query, PERIODS[period], None if stream in (None, "", ALL) else stream, LIMIT)
        jpegs = source.thumbnails([m.id for m in moments if m.has_thumbnail])
        thumbs = {row_id: jpeg_src(jpeg) for row_id, jpeg in jpegs.items() if jpeg}
    except HistoryUnavailable as err:
        return message_html(f"cannot search the timeline: {err}")
    except Exception as err:  # a bug or an unexpected I/O error: logged with its traceback, shown as a message
        logger.exception("history search failed")
        return message_html(f"the search failed: {type(err).__name__}: {err}")
    found = f"{len(moments)} moment{'s' if len(moments) != 1 else ''}"
    order = "best match first" if query else "newest first"
    more = f" (the first {LIMIT})" if len(moments) >= LIMIT else ""
    head = f'<p class="history-count">{found}, {order}{more}</p>'
    return head + history_html(moments, thumbs)
