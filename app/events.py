"""The assistant's events on their way out: logins redacted from their text, and the JSON-lines log.

The events themselves (one typed dataclass per kind), their records and the bus live in `bus/`, the floor both
`app/` and `ui/` stand on. Text in an event never holds a login: `redacted` passes every string through
`bus.redact.redact_source` before an event is published, so the terminal, the log, the timeline, the page
and the outputs all get `rtsp://***@host/x`. The log file is created private (0600).
"""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path
from typing import Any

from app.private_paths import open_private_append
from bus import Event, EventBus, to_json
from bus.redact import redact_source

__all__ = ["Event", "EventBus", "JsonlLog", "redacted"]


def redacted(event: Event) -> Event:
    """The event with every login redacted from its text (at any depth of dicts, lists and tuples)."""
    changes = {}
    for f in dataclasses.fields(event):
        value = getattr(event, f.name)
        clean = _redacted(value)
        if clean is not value:
            changes[f.name] = clean
    return dataclasses.replace(event, **changes) if changes else event


def _redacted(value: Any) -> Any:
    if isinstance(value, str):
        clean = redact_source(value)
        return value if clean == value else clean
    if isinstance(value, dict):
        return {key: _redacted(v) for key, v in value.items()}
    if type(value) in (list, tuple):
        return type(value)(_redacted(v) for v in value)
    return value


class JsonlLog:
    """Appends logged events to a file, one record (`bus.records.to_record`) per line, flushed per event. The
    file is created with mode 0600 (an existing one of ours is made 0600; see `app.private_paths`)."""

    def __init__(self, path: Path) -> None:
        self._file = open_private_append(path)
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        if not event.LOGGED:
            return
        line = to_json(event)
        with self._lock:
            if not self._file.closed:
                self._file.write(line + "\n")
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()
