"""One background worker shape for everything that must not run on the model worker's thread.

A `BackgroundWorker` is a bounded drop-oldest queue (`bus.DropOldestQueue`: `put` never blocks; when full the
oldest item is dropped and counted), one thread that hands each item to `send` (supervised: a crash is reported
and the thread restarts with a backoff, `bus.supervisor`), a stop, and `close(timeout)`, which delivers
what is queued until the deadline and then abandons the rest, counted. Drops are reported through `on_error`
(or `on_drops`; at most every `report_every_s` seconds, and once more at close), never raised.

A new output is then a small class with a `send(item)` handed to a worker: see `QueuedSubscriber`, which puts a
bus subscriber (the terminal printer, the JSON-lines log) behind one. A writer that wants more takes the hooks:
`idle` (work for a quiet moment), `finish` (release a connection on the worker's thread), `on_drops` (where drop
reports go), `stop()` (give up for good) and `BatchWorker` (many queued items at once: one transaction for many
rows); the timeline writer (`timeline.writer`) uses them all.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from bus import DropOldestQueue, Event
from bus.reporting import ErrorCallback, call_reporter
from bus.supervisor import RestartPolicy, run_supervised

logger = logging.getLogger(__name__)

T = TypeVar("T")
POLL_S = 0.1  # how often an idle worker looks at its stop event


def report_due(dropped: int, reported: int, now: float, last_report: float, every_s: float) -> bool:
    """Whether to report drops now: there are new ones and the last report is at least `every_s` old."""
    return dropped > reported and now - last_report >= every_s


class BackgroundWorker(Generic[T]):
    """Hands queued items to `send` on its own thread.

    Args:
        name: for thread names and reports ("outputs", "event log", ...).
        send: called with each item, in order, on the worker's thread; may take its time (the queue absorbs
            it). An exception crashes the worker: it is reported by type (`bus.supervisor`), the item is lost,
            and the thread restarts after a backoff.
        queue_size: items kept while `send` is busy; beyond it the oldest is dropped (`dropped`), or, with
            `block`, `put` waits for room (a record that must lose nothing: the producer is slowed instead).
        on_error: called with a one-line message about drops, failures and crashes.
        report_every_s: drops are reported at most this often (seconds).
        restarts: how a crashed worker thread restarts.
        items: what the items are called in reports ("events", "requests").
        abort_grace_s: how long `close` still waits, after its deadline, for a `send` under way (one that
            waits should wait on `aborted`, set at the deadline).
        on_drops: where reports of dropped and abandoned items go; None: to `on_error`. `bus.reporting.log_only`
            only logs them (an owner that counts its losses its own way).
        idle: called on the worker's thread about every 0.1 s while nothing is queued (work that waits for a
            quiet moment). An exception crashes the worker, as in `send`.
        finish: called once when the worker ends: on its thread after the last `send` (or in `close` when it
            never started). Releases what `send` used (a connection); it should not raise (an exception is
            logged).
        on_discard: called with each item that never reaches `send`: dropped from a full queue, abandoned at close,
            discarded by `stop` (an owner that must let go of what an item holds: `bus.receipt`). It should not
            raise (an exception is logged).
    """

    def __init__(
        self,
        name: str,
        send: Callable[[T], None],
        queue_size: int = 256,
        on_error: ErrorCallback | None = None,
        report_every_s: float = 10.0,
        restarts: RestartPolicy | None = None,
        items: str = "items",
        abort_grace_s: float = 1.0,
        on_drops: ErrorCallback | None = None,
        idle: Callable[[], None] | None = None,
        finish: Callable[[], None] | None = None,
        block: bool = False,
        on_discard: Callable[[T], None] | None = None,
    ) -> None:
        if report_every_s < 0:
            raise ValueError(f"report_every_s must be >= 0, got {report_every_s}")
        self.name = name
        self.send = send
        self.on_error = on_error
        self.on_drops = on_error if on_drops is None else on_drops
        self.idle = idle
        self.finish = finish
        self.on_discard = on_discard
        self.report_every_s = report_every_s
        self.items = items
        self.block = block
        self.abort_grace_s = abort_grace_s
        self._queue: DropOldestQueue[T] = DropOldestQueue(queue_size)
        self._abort = threading.Event()  # the close deadline passed: end now, count the rest as dropped
        self._abandoned = 0
        self._reported = 0
        self._last_report = float("-inf")
        self._restarts = restarts or RestartPolicy()
        self._thread = threading.Thread(target=self._supervise, name=name, daemon=True)

    @property
    def aborted(self) -> threading.Event:
        """Set when the close deadline passed: a `send` that waits (a retry's backoff) should stop waiting."""
        return self._abort

    @property
    def dropped(self) -> int:
        """Items dropped: the oldest when the queue was full, plus those abandoned at close."""
        return self._queue.dropped + self._abandoned

    @property
    def queued(self) -> int:
        """Items waiting for `send` now."""
        return self._queue.qsize()

    @property
    def closed(self) -> bool:
        """Closed or stopped: `put` takes nothing more."""
        return self._queue.closed

    def put(self, item: T) -> bool:
        """Queues `item` without blocking (with `block`: once there is room); False when the worker is closed or
        its close deadline passed (the item is not taken)."""
        try:
            if self.block:
                return self._queue.put_waiting(item, self._abort)
            dropped = self._queue.put(item)
        except RuntimeError:  # closed
            return False
        if dropped is not None:
            self._discard([dropped])
        return True

    def start(self) -> None:
        self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        """No more items: delivers what is queued for up to `timeout` seconds, then abandons the rest (counted
        and reported). Joins the thread. Safe to call twice."""
        self._queue.close()
        if self._thread.ident is None:  # never started: nothing was delivered, everything queued is abandoned
            self._abandon()
            self._finish()
            return
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._abort.set()
            self._thread.join(self.abort_grace_s)
            if self._thread.is_alive():
                logger.warning("%s: the worker is still in a send after its close deadline", self.name)

    def stop(self) -> None:
        """Gives up for good (the owner's output is gone and it said why): `put` takes nothing more, what is
        queued is discarded (neither counted nor reported) and the thread ends after the `send` under way.
        May be called from `send`. `close` still joins the thread."""
        self._queue.close()
        self._discard(self._queue.drain())

    def _supervise(self) -> None:
        try:
            run_supervised(self.name, self._run, self.on_error, self._abort, self._restarts)
            self._abandon()
            self._report_drops(final=True)
        finally:
            self._finish()

    def _run(self) -> None:
        while not self._abort.is_set():
            try:
                item = self._queue.get(timeout=POLL_S)
            except queue.Empty:
                self._report_drops()
                if self.idle is not None:
                    self.idle()
                continue
            except EOFError:  # closed and empty
                return
            self._deliver(item)  # an exception crashes the worker: reported by type, restarted (the item is lost)
            self._report_drops()

    def _deliver(self, item: T) -> None:
        self.send(item)

    def _finish(self) -> None:
        finish, self.finish = self.finish, None  # once, even when an unstarted worker is closed twice
        if finish is None:
            return
        try:
            finish()
        except Exception:
            logger.exception("%s: finishing failed", self.name)

    def _discard(self, items: list[T]) -> None:
        if self.on_discard is None:
            return
        for item in items:
            try:
                self.on_discard(item)
            except Exception:
                logger.exception("%s: letting go of a discarded item failed", self.name)

    def _abandon(self) -> None:
        items = self._queue.drain()
        self._discard(items)
        left = len(items)
        if left:
            self._abandoned += left
            self._reported += left  # reported here, not again as drops
            call_reporter(self.on_drops, f"{self.name}: {left} {self.items} abandoned at shutdown")

    def _report_drops(self, final: bool = False) -> None:
        dropped, now = self.dropped, time.monotonic()
        if report_due(dropped, self._reported, now, float("-inf") if final else self._last_report, self.report_every_s):
            self._reported, self._last_report = dropped, now
            message = f"{self.name}: queue full, {dropped} {self.items} dropped so far (oldest first)"
            call_reporter(self.on_drops, message)


class BatchWorker(BackgroundWorker[T]):
    """A `BackgroundWorker` that hands `send_batch` what is queued, up to `max_batch` items at once (oldest first):
    one item while it keeps up, one transaction for many rows when it fell behind. The other arguments are
    `BackgroundWorker`'s (`send` is not taken: a lone item goes to `send_batch` as a list of one)."""

    def __init__(self, name: str, send_batch: Callable[[list[T]], None], max_batch: int = 32, **options: Any) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        super().__init__(name, self._send_one, **options)
        self.send_batch = send_batch
        self.max_batch = max_batch

    def _send_one(self, item: T) -> None:
        self.send_batch([item])

    def _deliver(self, item: T) -> None:
        self.send_batch([item, *self._queue.drain(self.max_batch - 1)])


class QueuedSubscriber:
    """A bus subscriber moved off the publishing (model worker's) thread: `__call__` queues the event, the
    worker hands it to `subscriber` in order. `close()` delivers what is left (bounded by its timeout). A display
    may skip (the oldest dropped when full); a record (`block`: the event log) never does: the publisher waits."""

    def __init__(
        self,
        name: str,
        subscriber: Callable[[Event], None],
        queue_size: int = 1024,
        on_error: ErrorCallback | None = None,
        block: bool = False,
    ) -> None:
        self.subscriber = subscriber
        self.worker: BackgroundWorker[Event] = BackgroundWorker(
            name, subscriber, queue_size, on_error, items="events", block=block
        )

    def __call__(self, event: Event) -> None:
        self.worker.put(event)

    def start(self) -> None:
        self.worker.start()

    def close(self, timeout: float = 5.0) -> None:
        self.worker.close(timeout)

    @property
    def dropped(self) -> int:
        return self.worker.dropped
