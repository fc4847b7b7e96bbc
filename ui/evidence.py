"""What an answer drew on, under it in the chat: "seen at 00:12:40-00:12:44 (recall), ..." and a few small
thumbnails. An answer's evidence is a tuple of `bus.EvidenceSpan`s (stream-time seconds; source "recall",
"attention" or "timeline", whose spans also carry `row_id`).

Thumbnails come from what the page already has: the clip previews each stream keeps (`StreamView.recent`, the
latest few clips) for spans of those clips, and the timeline's thumbnail of a "timeline" item (through the
function the app passes in). They are made once per answer, for the latest answers only (bounded, cheap).
"""

from __future__ import annotations

import base64
import io
import logging
import threading
from collections.abc import Callable, Iterable, Sequence

import numpy as np
from PIL import Image

from bus import EvidenceSpan
from bus.clock import Span, merge_evidence
from ui.history import HistoryUnavailable, jpeg_src
from ui.state import Snapshot, Turn

logger = logging.getLogger(__name__)

THUMB_WIDTH = 96  # pixels
THUMB_QUALITY = 75
MAX_THUMBS = 3  # per answer
THUMB_TURNS = 10  # the latest answers with thumbnails (the chat is re-sent whole); older ones keep "seen at"
EPS_S = 1e-6

TimelineThumbnail = Callable[[int], "bytes | None"]


def seen_at(evidence: Iterable[EvidenceSpan]) -> str:
    """seen at 00:12:40-00:12:48 (recall), 00:13:00-00:13:04 (attention); empty without evidence."""
    spans = merge_evidence(evidence)
    return "seen at " + ", ".join(s.label for s in spans) if spans else ""


def frame_src(frame: np.ndarray, width: int = THUMB_WIDTH) -> str:
    """A frame ([H, W, 3] uint8 RGB) as a small inline JPEG image source."""
    image = Image.fromarray(np.ascontiguousarray(frame, dtype=np.uint8)).convert("RGB")
    if image.width > width:
        image = image.resize((width, max(1, round(image.height * width / image.width))), Image.Resampling.BILINEAR)
    out = io.BytesIO()
    image.save(out, format="JPEG", quality=THUMB_QUALITY)
    return "data:image/jpeg;base64," + base64.b64encode(out.getvalue()).decode("ascii")


def clip_preview(span: Span, recent: Sequence[tuple[float, float, np.ndarray]]) -> np.ndarray | None:
    """The preview of the latest kept clip inside `span` (its last frame), or None when none is kept."""
    inside = [frame for start, end, frame in recent if start >= span.start - EPS_S and end <= span.end + EPS_S]
    return inside[-1] if inside else None


def thumbnails(turn: Turn, snap: Snapshot, timeline: TimelineThumbnail | None) -> tuple[tuple[str, str], ...]:
    """Up to MAX_THUMBS (image source, span label) for `turn`'s evidence: timeline spans through `timeline`,
    the others from their stream's kept clip previews."""
    out: list[tuple[str, str]] = []
    for span in merge_evidence(turn.evidence):
        if len(out) >= MAX_THUMBS:
            break
        src = None
        if span.source == "timeline" and span.row_ids and timeline is not None:
            src = _timeline_src(timeline, span.row_ids[0])
        elif span.source != "timeline":
            view = next((v for v in snap.streams if v.name == (span.stream or turn.stream)), None)
            frame = None if view is None else clip_preview(span, view.recent)
            src = None if frame is None else frame_src(frame)
        if src is not None:
            out.append((src, span.label))
    return tuple(out)


def _timeline_src(timeline: TimelineThumbnail, row_id: int) -> str | None:
    try:
        jpeg = timeline(row_id)
    except HistoryUnavailable as err:
        logger.warning("no thumbnail for timeline row %d: %s", row_id, err)
        return None
    return jpeg_src(jpeg) if jpeg else None


class EvidenceThumbs:
    """Thumbnails by turn (its `seq`), made once when a finished answer is first shown, for the latest
    THUMB_TURNS answers with evidence; older ones are forgotten. Thread-safe: every tab's refresh asks."""

    def __init__(self, timeline: TimelineThumbnail | None = None) -> None:
        self.timeline = timeline
        self._made: dict[int, tuple[tuple[str, str], ...]] = {}
        self._lock = threading.Lock()

    def for_snapshot(self, snap: Snapshot) -> dict[int, tuple[tuple[str, str], ...]]:
        """{turn seq: ((image source, span label), ...)} for the latest finished answers with evidence."""
        turns = [t for t in snap.turns if t.done and t.error is None and t.evidence][-THUMB_TURNS:]
        with self._lock:
            self._made = {
                t.seq: self._made[t.seq] if t.seq in self._made else thumbnails(t, snap, self.timeline) for t in turns
            }
            return dict(self._made)
