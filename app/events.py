"""Events the assistant emits, the bus that fans them out, and the JSON-lines log.

Every event is a plain dict with at least `type` and `t_wall` (seconds since the epoch). Types:
`status`, `clip`, `answer_start`, `answer_piece`, `answer`, `error`, `warning`, `capture`, `end`, `check` (a
watch's yes/no check: alert, p_yes, ms) and `alert` (id, alert, state begin|end, p_yes, stream_time, snapshot
JPEG at begin, duration_s at end). Each also names
its `stream` (None for events of the whole process).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

Event = dict[str, Any]
Subscriber = Callable[[Event], None]

# answer pieces are for live displays; the log keeps the whole answer in its `answer` event
UNLOGGED_FIELDS = frozenset({"preview", "snapshot"})  # frames (live previews, alert JPEGs): not for the log
LOGGED_TYPES = frozenset(
    {"status", "clip", "answer_start", "answer", "error", "warning", "capture", "end", "check", "alert"}
)


def make_event(type_: str, **fields: Any) -> Event:
    return {"type": type_, "t_wall": round(time.time(), 3), **fields}


class EventBus:
    """Delivers each event to every subscriber, in the publishing thread. A failing subscriber is logged
    and skipped: a broken display must not stop the model."""

    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []
        self._lock = threading.Lock()

    def subscribe(self, subscriber: Subscriber) -> None:
        with self._lock:
            self._subscribers.append(subscriber)

    def unsubscribe(self, subscriber: Subscriber) -> None:
        with self._lock:
            if subscriber in self._subscribers:
                self._subscribers.remove(subscriber)

    def publish(self, event: Event) -> None:
        with self._lock:
            subscribers = list(self._subscribers)
        for subscriber in subscribers:
            try:
                subscriber(event)
            except Exception:
                logger.exception("event subscriber %r failed on a %s event", subscriber, event.get("type"))


class JsonlLog:
    """Appends logged events to a file, one JSON object per line, flushed per event."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        if event["type"] not in LOGGED_TYPES:
            return
        record = {key: value for key, value in event.items() if key not in UNLOGGED_FIELDS}
        line = json.dumps(record, ensure_ascii=False, default=str)
        with self._lock:
            if not self._file.closed:
                self._file.write(line + "\n")
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()
