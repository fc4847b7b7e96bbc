"""The timeline's bus subscriber: answers, alerts and stream events written (SQLite or PostgreSQL) on its own thread.

The bus calls `TimelineWriter.__call__` on the model worker's thread, so it only puts the event into the bounded
queue of an `bus.worker.BatchWorker` (the oldest dropped and counted when full) and returns; it never touches the
disk. The worker's thread writes what is queued, up to `BATCH` rows per transaction. Clip previews go to a
second small queue of their own (frames are large) and become thumbnails on the writer's thread. `check`
events are not kept (one per watch every few seconds). When writing fails (disk full, the file removed or made
read-only, I/O errors), `on_error` is called once and the writer stops; the assistant goes on without it.
When a database server goes away (PostgreSQL), `on_error` is called once, the rows in hand and the bounded queue
are kept (the oldest dropped and counted when full), and the writer reconnects with a growing delay; once it
writes again, `on_recover` is called. A row written twice around a lost commit is refused by its `uid`.

A fleet's spooled alerts and answers carry a receipt (`bus.receipt`): each is held from the moment it is queued
until its transaction committed (or the writer gave up on it: dropped, stopped, abandoned at close), so the head
acknowledges it to its host only once it is in the timeline; its durable key goes in the row (`event_key`,
unique), so the same event delivered again by a later run is not written twice.

Wiring::

    writer = TimelineWriter(TimelineConfig(path), on_error=report)   # TimelineError: exit 2
    bus.subscribe(writer)
    writer.start()
    ...
    bus.unsubscribe(writer)
    writer.close(timeout=5.0)
"""

from __future__ import annotations

import logging
import threading

import numpy as np

from bus import Alert, Answer, ClipEvent, DropOldestQueue, Event
from bus.receipt import hold, release
from bus.redact import redact_source
from bus.reporting import ErrorCallback, log_only
from bus.worker import BatchWorker
from timeline.config import TimelineConfig, TimelineError
from timeline.records import STREAM_EVENT_TYPES, alert_row, answer_row, stream_row
from timeline.store import Row, TimelineStore
from timeline.thumbnails import PreviewRings, thumbnail_jpeg

logger = logging.getLogger(__name__)

BATCH = 32  # rows per transaction at most
DROP_REPORT_EVERY_S = 60.0  # drops are logged at most this often (an outage's are told when writing again)
PREVIEW_QUEUE = 16  # clip previews waiting for the writer (full frames: kept few)
RECONNECT_MIN_S, RECONNECT_MAX_S = 0.5, 10.0  # delays between tries while a database server is away
CLOSE_GRACE_S = 2.0  # after the close's deadline: the batch in hand given up and the connection closed


class TimelineWriter:
    """Subscribes to the bus (it is the subscriber) and writes the timeline.

    Args:
        config: where and how much; opening happens here and raises `TimelineError` with advice.
        on_error: called from the writer's thread with a one-line message when writing fails for good (once),
            or when a database server went away (once per outage); the caller typically publishes it as an
            `error` event with where="timeline". Dropped events are only logged.
        on_recover: called from the writer's thread with a one-line message when it writes again after an
            outage (e.g. a `status` event).
    """

    def __init__(
        self, config: TimelineConfig, on_error: ErrorCallback | None = None, on_recover: ErrorCallback | None = None
    ) -> None:
        self.config = config
        self.on_error = on_error
        self.on_recover = on_recover
        self.store = TimelineStore(config)
        self.written = 0  # rows
        self.error: str | None = None
        self.outages = 0  # times the database went away
        self.worker: BatchWorker[Event] = BatchWorker(
            "timeline",
            self._send,
            BATCH,
            queue_size=config.queue_size,
            on_error=on_error,
            report_every_s=DROP_REPORT_EVERY_S,
            items="events",
            abort_grace_s=CLOSE_GRACE_S,
            on_drops=log_only,
            idle=self._take_previews,
            finish=self._close_store,
            on_discard=release,
        )
        self._previews: DropOldestQueue[tuple[str, float, np.ndarray]] = DropOldestQueue(PREVIEW_QUEUE)
        self._failed = threading.Event()
        self._lost_at_drops: int | None = None  # `dropped` when the current outage began; None while connected
        self._rings = PreviewRings(config.previews_per_stream)
        self._last_answer_time: dict[str, float] = {}

    @property
    def dropped(self) -> int:
        """Events dropped (oldest first) because the writer's queue was full, or left unwritten at close."""
        return self.worker.dropped

    @property
    def failed(self) -> bool:
        return self._failed.is_set()

    def __call__(self, event: Event) -> None:
        """The bus subscriber: queues what the timeline keeps; never blocks, never raises."""
        stream = event.stream
        if self._failed.is_set() or self.worker.closed:
            return
        if isinstance(event, ClipEvent):
            if stream is not None and event.preview is not None:
                self._previews.put((stream, float(event.stream_time or 0.0), event.preview))
        elif isinstance(event, (Answer, Alert)) or (isinstance(event, STREAM_EVENT_TYPES) and stream is not None):
            hold(event)  # until its row was committed, or given up on
            if not self.worker.put(event):
                release(event)

    def start(self) -> None:
        self.worker.start()

    def close(self, timeout: float = 5.0) -> None:
        """Writes what is queued (for up to `timeout` seconds, then about 2 s more to give up the rows in hand
        and close the connection), then closes the file. Joins the thread."""
        self.worker.close(timeout)

    def _send(self, events: list[Event]) -> None:
        """The worker's `send_batch`: up to `BATCH` events become rows in one transaction; their receipts are let
        go of once it committed (or was given up on)."""
        try:
            self._take_previews()
            rows = [row for row in map(self._row, events) if row is not None]
            if rows and not self._write(rows):
                logger.warning("timeline %s: closed while the database was away: %d rows not written",
                               self.config.where, len(rows))  # fmt: skip
        except (*self.store.errors, TimelineError, OSError) as err:
            self._fail(str(err))
        finally:
            for event in events:
                release(event)

    def _write(self, rows: list[Row]) -> bool:
        """Writes `rows`; while the database is away, keeps them and reconnects (see the module). False: the
        close's deadline passed first."""
        delay = RECONNECT_MIN_S
        while True:
            try:
                self.written += self.store.write(rows)
            except self.store.lost as err:
                self._lost(err)
            else:
                self._recovered()
                return True
            while True:  # reconnect
                if self.worker.aborted.wait(delay):
                    return False
                delay = min(delay * 2, RECONNECT_MAX_S)
                try:
                    self.store.reconnect()
                except (*self.store.lost, TimelineError) as err:
                    logger.debug("timeline: reconnecting failed: %s", err)
                    continue
                break

    def _lost(self, err: BaseException) -> None:
        if self._lost_at_drops is not None:
            return
        self.outages += 1
        self._lost_at_drops = self.dropped
        reason = " ".join(str(err).split()) or type(err).__name__
        self.error = (
            f"timeline {self.config.where}: the database went away ({redact_source(reason)}); keeping up to "
            f"{self.config.queue_size} events and reconnecting"
        )
        logger.error("%s", self.error)
        self._call(self.on_error, self.error)

    def _recovered(self) -> None:
        if self._lost_at_drops is None:
            return
        dropped, self._lost_at_drops = self.dropped - self._lost_at_drops, None
        self.error = None
        message = f"timeline {self.config.where}: writing again ({dropped} events dropped meanwhile)"
        logger.info("%s", message)
        self._call(self.on_recover, message)

    def _call(self, callback: ErrorCallback | None, message: str) -> None:
        if callback is not None:
            try:
                callback(message)
            except Exception:
                logger.exception("the timeline's callback failed")

    def _row(self, event: Event) -> Row | None:
        stream = event.stream
        if isinstance(event, Answer):
            stream_time = float(event.stream_time or 0.0)
            previous = self._last_answer_time.get(stream, 0.0)
            self._last_answer_time[stream] = stream_time
            return answer_row(event, previous, self._rings.nearest(stream, stream_time))
        if isinstance(event, Alert):
            if event.snapshot:
                thumbnail = self._thumbnail(event.snapshot)
            else:
                thumbnail = self._rings.nearest(stream, float(event.stream_time or 0.0))
            return alert_row(event, thumbnail)
        return stream_row(event)

    def _take_previews(self) -> None:
        for stream, stream_time, frame in self._previews.drain():
            thumbnail = self._thumbnail(frame)
            if thumbnail is not None:
                self._rings.add(stream, stream_time, thumbnail)

    def _thumbnail(self, image: np.ndarray | bytes) -> bytes | None:
        try:
            return thumbnail_jpeg(image, self.config.thumbnail_width)
        except (OSError, ValueError, TypeError) as err:  # a bad frame costs its thumbnail, not the row
            logger.warning("timeline: no thumbnail (%s)", err)
            return None

    def _fail(self, reason: str) -> None:
        reason = redact_source(" ".join(reason.split()))
        self.error = f"timeline {self.config.where}: writing stopped ({reason}); the assistant goes on without it"
        self._failed.set()
        self.worker.stop()
        self._previews.drain()
        logger.error("%s", self.error)
        self._call(self.on_error, self.error)

    def _close_store(self) -> None:
        try:
            self.store.close()
        except self.store.errors as err:
            logger.warning("timeline: closing failed: %s", err)
