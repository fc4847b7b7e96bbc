"""Answers that reach back in words: the timeline's best matching moments of a stream, put in front of a person's
question as short timestamped notes, so an answer can use what was seen past both KV tiers.

    prompt, cited = notes.prompt("when did the truck arrive?", stream="yard")

Only answers and alerts become notes (ranked by the reader: full-text match and recency), at most `limit` of
them within `max_chars` characters (a small token budget: about max_chars / 4 tokens). A timeline that cannot
be read gives no notes: the question goes as it is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from bus.clock import clock
from bus.stats import EvidenceSpan
from timeline.config import Location, TimelineError
from timeline.reader import Moment, TimelineReader

logger = logging.getLogger(__name__)

HEADER = "Notes from earlier on this stream (when, stream time: what was seen):"


class TimelineNotes:
    """Reads the timeline at `path` (a file or a `PostgresTarget`; read-only: never waits on the writer) for a
    question's notes. A connection that failed is opened again at the next question."""

    def __init__(self, path: Location, limit: int = 3, max_chars: int = 600) -> None:
        self.path = path if not isinstance(path, str) else Path(path)
        self.limit, self.max_chars = limit, max_chars
        self._reader: TimelineReader | None = None

    def prompt(
        self, question: str, stream: str, fits: Callable[[str], bool] = lambda text: True
    ) -> tuple[str, list[EvidenceSpan]]:
        """The question with notes in front (or as it is, when nothing matches), and the notes as evidence.
        Notes are added best first while the prompt stays within `max_chars` and `fits` (the cache's room)."""
        moments = self._search(question, stream)
        lines, cited, used = [], [], len(HEADER)
        for moment in moments:
            line = _note(moment)
            if used + len(line) > self.max_chars or not fits("\n".join([HEADER, *lines, line, "", question])):
                break
            lines.append(line)
            used += len(line)
            cited.append(
                EvidenceSpan(
                    start=moment.start_s if moment.start_s is not None else 0.0,
                    end=moment.end_s if moment.end_s is not None else 0.0,
                    source="timeline",
                    score=round(-(moment.score or 0.0), 4),
                    row_id=moment.id,
                )
            )
        if not lines:
            return question, []
        return "\n".join([HEADER, *lines, "", question]), cited

    def _search(self, question: str, stream: str) -> list[Moment]:
        try:
            if self._reader is None:
                self._reader = TimelineReader(self.path)
            found = self._reader.search(question, stream=stream, limit=self.limit * 3)
        except TimelineError as err:
            logger.warning("timeline notes unavailable: %s", err)
            self.close()
            return []
        return [m for m in found if m.kind in ("answer", "alert") and m.text][: self.limit]

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None


def _note(moment: Moment) -> str:
    when = time.strftime("%a %H:%M", time.localtime(moment.t_wall))
    span = f"{clock(moment.start_s)}-{clock(moment.end_s)}" if moment.end_s is not None else "?"
    said = moment.text if moment.kind == "alert" else f"asked {moment.question!r}, answered {moment.text!r}"
    return f"- {when}, {span}: {said[:240]}"
