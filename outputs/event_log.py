"""The JSON-lines event log (--log-jsonl): one record per logged event, the file created private (0600).

Its events arrive already redacted (`bus.redact.redacted` runs before an event is published). The log is a record,
not a display: behind its queue (`queued_log`) it never drops an event; a burst above the disk's speed makes the
publisher wait instead (the terminal, a display, may still skip)."""

from __future__ import annotations

import threading
from pathlib import Path

from bus import Event, to_json
from bus.private_paths import open_private_append
from bus.worker import QueuedSubscriber


class JsonlLog:
    """Appends logged events to a file, one record (`bus.records.to_record`) per line, flushed per event. The
    file is created with mode 0600 (an existing one of ours is made 0600; see `bus.private_paths`)."""

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


LOG_QUEUE = 4096  # events waiting for the disk before the publisher waits


def queued_log(log: JsonlLog) -> QueuedSubscriber:
    """`log` behind its own thread and bounded queue; when the queue is full the publisher waits (backpressure),
    so no event is ever dropped."""
    return QueuedSubscriber("event log", log, queue_size=LOG_QUEUE, block=True)
