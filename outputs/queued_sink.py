"""A sink that only knows how to `send` one event, made into an output the publisher can feed.

`QueuedSink(sink)` gives it its own `bus.worker.BackgroundWorker` (bounded queue, thread, close with a deadline,
drops counted and reported), so a slow receiver delays neither the model nor another output. A failed `send`
is reported by the exception's type only (its text may hold a URL with a token) and the next event goes on.
"""

from __future__ import annotations

import logging
from typing import Protocol

from bus import Event
from bus.receipt import delivered_before, hold, mark_delivered, release
from bus.reporting import ErrorCallback, call_reporter
from bus.worker import BackgroundWorker

logger = logging.getLogger(__name__)


class SendSink(Protocol):
    """What a new output writes: a `name` for messages, `wants(event)` (which events it takes) and `send(event)`
    (called on its own thread; it may wait on the network, within its own timeout). Optionally a `mark_name`, when
    `name` does not tell two such outputs apart (it is hashed in the delivery marks: bus/delivery_marks.py)."""

    name: str

    def wants(self, event: Event) -> bool: ...

    def send(self, event: Event) -> None: ...


class QueuedSink:
    """`sink` behind its own worker: the publisher's `Sink` (start, handle, close, dropped)."""

    def __init__(self, sink: SendSink, on_error: ErrorCallback | None = None, queue_size: int = 64) -> None:
        self.sink = sink
        self.name = sink.name
        self.mark_name = getattr(sink, "mark_name", sink.name)  # what its delivery marks name (bus.delivery_marks)
        self.repeats_skipped = 0  # replayed events it had delivered before a fleet's head restarted
        self.on_error = on_error
        self.failed = 0
        self.worker: BackgroundWorker[Event] = BackgroundWorker(
            sink.name, self._send, queue_size, on_error, items="events", on_discard=release
        )

    @property
    def dropped(self) -> int:
        return self.worker.dropped

    def start(self) -> None:
        self.worker.start()

    def handle(self, event: Event) -> None:
        if self.sink.wants(event) and delivered_before(event, self.mark_name):
            self.repeats_skipped += 1
        elif self.sink.wants(event):
            hold(event)  # until it was sent, or given up on (a receipt: `bus.receipt`)
            if not self.worker.put(event):
                release(event)

    def close(self, timeout: float) -> None:
        self.worker.close(timeout)

    def _send(self, event: Event) -> None:
        try:
            self.sink.send(event)
            mark_delivered(event, self.mark_name)
        except Exception as exc:  # reported by type: an exception's text may hold a URL with a token
            self.failed += 1
            logger.debug("output %s failed on a %s event", self.name, event.TYPE, exc_info=True)
            call_reporter(self.on_error, f"output {self.name} failed on a {event.TYPE} event ({type(exc).__name__})")
        finally:
            release(event)
