"""The bridge between the event bus and the outputs that leave the process (MQTT, webhooks, ntfy, ...).

The bus calls subscribers in the publishing thread, which is the model worker. `OutputPublisher.__call__`
therefore only puts the event into a bounded queue (dropping the oldest when full, counted) and returns; its
own thread takes events out and hands them to each sink. A sink's `handle` must return quickly too: a sink
that talks to the network keeps its own queue and thread (or library loop), so one slow or unreachable
output never delays another.

An event with a receipt (`bus.receipt`: a fleet's spooled alerts and answers) is held while it waits here, and
each sink that takes it holds it too until it delivered it or gave up on it (dropped, retries spent): the head
acknowledges it to its host only then.

Wiring::

    publisher = OutputPublisher([MqttSink(...), WebhookSink(...)], on_error=report, wants=(Alert, Answer))
    bus.subscribe(publisher)
    publisher.start()
    ...
    bus.unsubscribe(publisher)
    publisher.close(timeout=5.0)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Protocol

from bus import ErrorEvent, Event
from bus.receipt import hold, release
from bus.reporting import ErrorCallback, call_reporter
from bus.worker import BackgroundWorker

logger = logging.getLogger(__name__)


class Sink(Protocol):
    """One output. `handle` is called on the publisher's thread and must not wait on the network."""

    name: str

    def start(self) -> None: ...

    def handle(self, event: Event) -> None: ...

    def close(self, timeout: float) -> None: ...

    @property
    def dropped(self) -> int: ...


class OutputPublisher:
    """Subscribes to the bus (it is the subscriber: `bus.subscribe(publisher)`) and feeds the sinks from one
    `bus.worker.BackgroundWorker` (bounded queue, its own thread, drops counted and reported).

    Args:
        sinks: the outputs; `start()` starts them and `close()` closes them.
        on_error: called (from the publisher's thread or a sink's) with a one-line message when events are
            dropped or a sink fails; the caller typically publishes it as an `error` event. It may publish
            on the bus: error events are not queued here.
        queue_size: events kept while the sinks are busy; beyond it the oldest is dropped (`dropped`).
        report_every_s: drops are reported at most this often (seconds).
        wants: the event types queued for the sinks (the union of what the configured outputs want:
            `outputs.registry.wanted_types`); error events never are, whatever it says.
    """

    def __init__(
        self,
        sinks: Sequence[Sink],
        on_error: ErrorCallback | None = None,
        queue_size: int = 256,
        report_every_s: float = 10.0,
        wants: tuple[type[Event], ...] = (Event,),
    ) -> None:
        self.sinks = list(sinks)
        self.wants = wants
        self.on_error = on_error
        self.worker: BackgroundWorker[Event] = BackgroundWorker(
            "outputs", self._send, queue_size, on_error, report_every_s, items="events", on_discard=release
        )

    @property
    def dropped(self) -> int:
        """Events dropped (oldest first) because the publisher's queue was full."""
        return self.worker.dropped

    def __call__(self, event: Event) -> None:
        """The bus subscriber: queues the event if a sink may act on it; never blocks."""
        if isinstance(event, self.wants) and not isinstance(event, ErrorEvent):
            hold(event)  # until every sink took what it wants of it (each holds it on its own then)
            if not self.worker.put(event):
                release(event)

    def start(self) -> None:
        for sink in self.sinks:
            sink.start()
        self.worker.start()

    def close(self, timeout: float = 5.0) -> None:
        """Delivers what is queued to the sinks, then closes them; the whole takes about `timeout` seconds
        at most (sinks get what the publisher's thread left of it). Joins the thread."""
        deadline = time.monotonic() + timeout
        self.worker.close(timeout)
        for sink in self.sinks:
            try:
                sink.close(max(0.0, deadline - time.monotonic()))
            except Exception:
                logger.exception("closing output %s failed", sink.name)

    def _send(self, event: Event) -> None:
        try:
            for sink in self.sinks:
                try:
                    sink.handle(event)
                except Exception as exc:  # reported by type: an exception's text may hold a payload or a secret
                    logger.debug("output %s failed on a %s event", sink.name, event.TYPE, exc_info=True)
                    message = f"output {sink.name} failed on a {event.TYPE} event ({type(exc).__name__})"
                    call_reporter(self.on_error, message)
        finally:
            release(event)
