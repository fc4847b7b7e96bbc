"""The alerts as the page shows them: the banner of alerts on now, the list of the latest ones with a thumbnail
of each begin snapshot, and each watch's latest p_yes in its stream's panel. HTML strings from `Alert`s; the
thumbnails are inline `data:` images (no file to serve, nothing to fetch), made once per alert by `Thumbnails`.
"""

from __future__ import annotations

import base64
import html
import io
import threading
import time
from collections.abc import Mapping, Sequence

from PIL import Image

from ui.alerts import Alert
from ui.render import format_stream_time

THUMB_WIDTH = 160  # pixels; the list shows thumbnails, not the frame
THUMB_QUALITY = 80
DOT_STYLE = "display:inline-block;width:10px;height:10px;border-radius:50%;background:#dc2626;margin-right:6px"
DOT = f'<span style="{DOT_STYLE}"></span>'  # a red dot drawn by CSS: browsers may lack an emoji font
TABLE_CSS = """
.alerts-table { border-collapse: collapse; width: 100%; font-size: 0.9em; }
.alerts-table th, .alerts-table td { border-bottom: 1px solid #e5e7eb; padding: 4px 8px; text-align: left; }
.alerts-table tr.ongoing td { background: #fef2f2; }
.alerts-table img { display: block; border-radius: 4px; }
"""


def wall_clock(t_wall: float | None) -> str:
    """14:03:12 (local time), or - when unknown."""
    return "-" if not t_wall else time.strftime("%H:%M:%S", time.localtime(t_wall))


def since(alert: Alert) -> str:
    """t = 44.0 s (14:03:12): when it began, in its stream's time and on the wall clock."""
    return f"t = {format_stream_time(alert.begin_time)} ({wall_clock(alert.begin_wall)})"


def banner_html(active: Sequence[Alert]) -> str:
    """One line per alert on now; empty when none (the banner takes no room)."""
    if not active:
        return ""
    lines = [
        f'<div class="alert-line" data-alert-id="{html.escape(a.id)}">{DOT}<b>{html.escape(a.alert)}</b> on stream '
        f"<b>{html.escape(a.stream)}</b> since {since(a)} · p_yes {a.p_yes:.2f} · "
        f"<i>{html.escape(a.question)}</i></div>"
        for a in active
    ]
    head = "Alert on" if len(active) == 1 else f"{len(active)} alerts on"
    style = "background:#fee2e2;color:#7f1d1d;border:2px solid #dc2626;border-radius:8px;padding:8px 12px"
    return f'<div class="alert-banner" style="{style}"><b>{head}</b>{"".join(lines)}</div>'


def _end_cells(a: Alert) -> tuple[str, str]:
    if a.ongoing:
        return "ongoing", "ongoing"
    if a.closed_by is not None:
        return f"{html.escape(a.closed_by)} ({wall_clock(a.end_wall)})", "-"
    end = f"t = {format_stream_time(a.end_time)} ({wall_clock(a.end_wall)})"
    return end, "-" if a.duration_s is None else f"{a.duration_s:.1f} s"


def alerts_html(alerts: Sequence[Alert], thumbs: Mapping[str, str | None] | None = None) -> str:
    """A table of `alerts` (newest first): snapshot (`thumbs`: image sources by alert id), stream, alert,
    question, begin, end, duration, p_yes."""
    if not alerts:
        return '<p class="alerts-empty"><i>No alerts yet.</i></p>'
    rows = []
    for a in alerts:
        src = (thumbs or {}).get(a.id)
        image = f'<img src="{src}" alt="snapshot of {html.escape(a.id)}" width="{THUMB_WIDTH}">' if src else "-"
        end, duration = _end_cells(a)
        rows.append(
            f'<tr class="alert-row{" ongoing" if a.ongoing else ""}" data-alert-id="{html.escape(a.id)}">'
            f"<td>{image}</td><td>{html.escape(a.stream)}</td><td><b>{html.escape(a.alert)}</b></td>"
            f"<td>{html.escape(a.question)}</td><td>{since(a)}</td><td>{end}</td><td>{duration}</td>"
            f"<td>{a.p_yes:.2f}</td></tr>"
        )
    head = "".join(
        f"<th>{h}</th>" for h in ("snapshot", "stream", "alert", "question", "began", "ended", "duration", "p_yes")
    )
    return f'<table class="alerts-table"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def thumbnail_src(jpeg: bytes, width: int = THUMB_WIDTH) -> str:
    """A JPEG snapshot as a `data:image/jpeg;base64,...` thumbnail at most `width` pixels wide."""
    image = Image.open(io.BytesIO(jpeg)).convert("RGB")
    if image.width > width:
        image = image.resize((width, max(1, round(image.height * width / image.width))))
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=THUMB_QUALITY)
    return "data:image/jpeg;base64," + base64.b64encode(out.getvalue()).decode("ascii")


class Thumbnails:
    """Thumbnails by alert id, each made once, for the alerts shown now (the others are dropped). Thread-safe:
    every tab's refresh asks."""

    def __init__(self) -> None:
        self._srcs: dict[str, str | None] = {}
        self._lock = threading.Lock()

    def for_alerts(self, alerts: Sequence[Alert]) -> dict[str, str | None]:
        """{alert id: data URI, or None without a snapshot} for `alerts`; forgets every other alert's."""
        with self._lock:
            self._srcs = {a.id: self._srcs[a.id] if a.id in self._srcs else _thumbnail(a) for a in alerts}
            return dict(self._srcs)


def _thumbnail(alert: Alert) -> str | None:
    return None if alert.snapshot is None else thumbnail_src(alert.snapshot)
