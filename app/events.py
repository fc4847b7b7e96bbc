"""Events the assistant emits, the bus that fans them out, and the JSON-lines log.

Every event is a plain dict with at least `type` and `t_wall` (seconds since the epoch). Types:
`status`, `clip`, `answer_start`, `answer_piece`, `answer`, `error`, `warning`, `capture`, `end`, `check` (a
watch's yes/no check: alert, p_yes, ms) and `alert` (id, alert, state begin|end, p_yes, stream_time, snapshot
JPEG at begin, duration_s at end). Each also names
its `stream` (None for events of the whole process). Text in an event never holds a login: `make_event` passes
every string through `capture.redact.redact_source`, so the terminal, the log, the timeline, the page and the
outputs all get `rtsp://***@host/x`. The log file is created private (0600).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.private_paths import open_private_append
from capture.redact import redact_source

logger = logging.getLogger(__name__)

Event = dict[str, Any]
Subscriber = Callable[[Event], None]

# answer pieces are for live displays; the log keeps the whole answer in its `answer` event
UNLOGGED_FIELDS = frozenset({"preview", "snapshot"})  # frames (live previews, alert JPEGs): not for the log
LOGGED_TYPES = frozenset(
    {"status", "clip", "answer_start", "answer", "error", "warning", "capture", "end", "check", "alert"}
)


def make_event(type_: str, **fields: Any) -> Event:
    """An event; its text (at any depth of dicts, lists and tuples) with every login redacted."""
    return {"type": type_, "t_wall": round(time.time(), 3), **{key: _redacted(v) for key, v in fields.items()}}


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        return redact_source(value)
    if isinstance(value, dict):
        return {key: _redacted(v) for key, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(_redacted(v) for v in value)
    return value


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
    """Appends logged events to a file, one JSON object per line, flushed per event. The file is created with
    mode 0600 (an existing one of ours is made 0600; see `app.private_paths`)."""

    def __init__(self, path: Path) -> None:
        self._file = open_private_append(path)
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
