"""The capture thread: decode, sample at ``fps`` by timestamp, resize, group into clips, hand over.

The thread never blocks on its consumer: clips go into a ``DropOldestQueue`` (oldest dropped and
counted when full). Mid-stream problems become ``CaptureEvent``s; the end of the stream is an
``EndOfStream`` returned by ``get_clip``. One ``threading.Event`` stops it.

Typical use::

    stop = threading.Event()
    try:
        capture = CaptureThread(CaptureConfig("clip.mp4", fps=1, max_size=(448, 448)), stop)
    except SourceError as err:   # raised before any thread starts
        sys.exit(f"error: {err}")
    capture.start()
    while not isinstance(item := capture.get_clip(timeout=1.0), EndOfStream):
        if item is not None:
            ...  # item.frames: [F, H, W, 3] uint8 RGB
    stop.set(); capture.join(2.0)
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import asdict

import numpy as np

from bus.drop_queue import DropOldestQueue
from bus.redact import redact_source
from capture.backends import open_source
from capture.config import CaptureConfig
from capture.errors import SourceError, StreamDropped
from capture.sampling import ClipAssembler, FrameSampler, PendingClip, StreamClock, fit_size, pacing_delay
from capture.source import ClosedSource, FrameSource
from capture.types import CaptureEvent, CaptureStats, Clip, EndOfStream, EventType

logger = logging.getLogger(__name__)

_BAD_PACKET_EVENT_INTERVAL_S = 1.0


class CaptureThread:
    """Captures one source on a background thread.

    Constructing it opens the source (``SourceError`` on failure, before any thread exists); call
    ``start()`` to begin. Frames are sampled at ``config.fps`` by stream time, resized to fit
    ``config.max_size`` and grouped into ``Clip``s of ``config.clip_seconds``.

    Args:
        config: what to capture and how.
        stop_event: set it to stop the thread (it then exits within a frame, or within the network
            timeout in progress when a stream is stalled or being reopened).
        source: an already opened source (default: ``open_source(config)``).
        opener: how to reopen the source after a drop or for ``loop`` (default ``open_source``).
    """

    def __init__(
        self,
        config: CaptureConfig,
        stop_event: threading.Event,
        source: FrameSource | None = None,
        opener: Callable[[CaptureConfig], FrameSource] = open_source,
    ) -> None:
        self.config = config
        self.stop_event = stop_event
        self._opener = opener
        self._source = source if source is not None else opener(config)
        self.description = self._source.description
        self._clips: DropOldestQueue[Clip] = DropOldestQueue(config.queue_size)
        self.events: DropOldestQueue[CaptureEvent] = DropOldestQueue(config.event_queue_size)
        """Mid-stream events, oldest first; read with ``poll_events()`` or ``events.get(timeout)``."""
        self.finished = threading.Event()
        """Set once the thread has ended and the last clip is queued."""
        self._end: EndOfStream | None = None
        self._lock = threading.Lock()
        self._counts = asdict(CaptureStats())
        self._closed_bad_packets = 0
        self._reported_bad_packets = 0
        self._last_bad_packet_event = 0.0
        self._clock = StreamClock()
        self._sampler = FrameSampler(config.fps)
        self._assembler = ClipAssembler(config.clip_seconds, config.fps)
        self._pace_origin: tuple[float, float] | None = None
        self._started = False
        self._thread = threading.Thread(target=self._run, name=f"capture[{self.description}]", daemon=True)

    # ----- consumer side -----

    def start(self) -> None:
        """Start capturing (once)."""
        if self.finished.is_set():
            raise RuntimeError(f"capture of {self.description} was closed; make a new CaptureThread")
        self._started = True
        self._thread.start()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread to end (after ``stop_event`` is set, or at end of stream).

        Returns:
            True if the thread has ended (and the source is closed).
        """
        if self._started:
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def close(self) -> None:
        """Stop, join, and close the source; use when ``start()`` may never have been called."""
        self.stop_event.set()
        if self._started:
            self._thread.join()
        elif not self.finished.is_set():
            self._retire_source()
            self._end = EndOfStream("stopped", f"{self.description}: closed before it started")
            self._clips.close()
            self.finished.set()

    def __enter__(self) -> CaptureThread:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def get_clip(self, timeout: float | None = None) -> Clip | EndOfStream | None:
        """The oldest waiting clip; ``EndOfStream`` once capture ended and every clip was taken;
        None if nothing arrived within ``timeout`` seconds."""
        try:
            return self._clips.get(timeout)
        except queue.Empty:
            return None
        except EOFError:
            return self._end or EndOfStream("stopped")

    def queued_clips(self) -> int:
        """Clips waiting for the consumer now (at most ``config.queue_size``)."""
        return self._clips.qsize()

    def poll_events(self) -> list[CaptureEvent]:
        """Every event not yet read, oldest first (never waits)."""
        return self.events.drain()

    def stats(self) -> CaptureStats:
        """A snapshot of the counters."""
        with self._lock:
            counts = dict(self._counts)
            counts["bad_packets"] = self._closed_bad_packets + self._source.bad_packets
        counts["dropped_events"] = self.events.dropped
        return CaptureStats(**counts)

    @property
    def dropped_clips(self) -> int:
        return self.stats().dropped_clips

    @property
    def dropped_frames(self) -> int:
        return self.stats().dropped_frames

    @property
    def bad_packets(self) -> int:
        return self.stats().bad_packets

    # ----- capture side -----

    def _count(self, name: str, n: int = 1) -> None:
        with self._lock:
            self._counts[name] += n

    def _event(self, type_: EventType, message: str) -> None:
        message = redact_source(message)  # a backend's error text may quote the URL it was given
        log = logger.warning if type_ in ("error", "warning") else logger.info
        log("%s", message)
        self.events.put(CaptureEvent(type_, message, self._clock.last, time.time()))

    def _run(self) -> None:
        end = EndOfStream("eof", f"{self.description} ended")
        try:
            end = self._loop()
        except Exception as err:  # a backend failure must end the stream, not the app
            logger.exception("capture of %s failed", self.description)
            end = EndOfStream("error", redact_source(f"capture of {self.description} failed: {err}"))
        finally:
            self._retire_source()  # also drops the decoder, so its worker threads exit now
            if end.reason != "stopped":
                last = self._assembler.flush()
                if last is not None:
                    self._emit(last)
            self._report_bad_packets(force=True)
            if end.reason == "error":
                self._event("error", end.message)
            self._event("end", end.message or f"{self.description}: {end.reason}")
            self._end = end
            self._clips.close()
            self.finished.set()

    def _loop(self) -> EndOfStream:
        while True:
            try:
                self._consume(self._source)
            except StreamDropped as err:
                if self.stop_event.is_set():
                    return EndOfStream("stopped", f"{self.description}: stopped")
                outcome = self._reconnect(str(err))
                if isinstance(outcome, EndOfStream):
                    return outcome
                self._source = outcome
                continue
            except SourceError as err:
                return EndOfStream("error", str(err))
            if self.stop_event.is_set():
                return EndOfStream("stopped", f"{self.description}: stopped")
            if not self.config.loop:
                return EndOfStream("eof", f"{self.description} ended")
            self._retire_source()
            try:
                self._source = self._opener(self.config)
            except SourceError as err:
                return EndOfStream("error", f"cannot loop: {err}")
            self._clock.restart()
            logger.info("%s: looping from the start", self.description)

    def _consume(self, source: FrameSource) -> None:
        """Read ``source`` until it ends or the stop event is set."""
        stop = self.stop_event
        for raw in source.frames():
            if stop.is_set():
                return
            self._count("decoded_frames")
            t = self._clock.map(raw.time)
            if not self._sampler.offer(t):
                continue
            if self.config.realtime and not self.config.is_live and not self._pace(t):
                return
            width, height = fit_size(raw.width, raw.height, self.config.max_size)
            rgb = raw.to_rgb(width, height)
            self._count("sampled_frames")
            for pending in self._assembler.add(t, rgb):
                self._emit(pending)
            self._report_bad_packets()

    def _pace(self, t: float) -> bool:
        """Wait until stream time ``t`` is due in wall time; False if stopped meanwhile."""
        now = time.monotonic()
        if self._pace_origin is None:
            self._pace_origin = (t, now)
        t0, wall0 = self._pace_origin
        delay = pacing_delay(t, t0, wall0, now)
        return not (delay > 0 and self.stop_event.wait(delay))

    def _emit(self, pending: PendingClip) -> None:
        frames = np.stack(pending.frames)  # [F, H, W, 3] uint8
        with self._lock:
            index = self._counts["clips"]
            self._counts["clips"] += 1
        clip = Clip(frames, pending.timestamps, pending.t_start, pending.t_end, index, self.stats(), time.time())
        if self.config.block_when_full and not self.config.is_live:
            self._clips.wait_for_room(self.stop_event)  # offline run: wait for the consumer, drop nothing
        dropped = self._clips.put(clip)
        if dropped is not None:
            with self._lock:
                self._counts["dropped_clips"] += 1
                self._counts["dropped_frames"] += dropped.num_frames
            logger.debug("%s: consumer behind, dropped clip %d", self.description, dropped.index)

    def _report_bad_packets(self, force: bool = False) -> None:
        total = self._closed_bad_packets + self._source.bad_packets
        now = time.monotonic()
        if total == self._reported_bad_packets:
            return
        if not force and now - self._last_bad_packet_event < _BAD_PACKET_EVENT_INTERVAL_S:
            return
        new = total - self._reported_bad_packets
        self._reported_bad_packets = total
        self._last_bad_packet_event = now
        self._event("error", f"{self.description}: skipped {new} bad packet(s) ({total} so far); decoding goes on")

    def _retire_source(self) -> None:
        """Close the current source, keep its counters, and leave a closed stand-in."""
        self._close_source()
        with self._lock:
            self._closed_bad_packets += self._source.bad_packets
            self._source = ClosedSource(self.description)

    def _close_source(self) -> None:
        try:
            self._source.close()
        except Exception:  # closing must not mask the real outcome
            logger.exception("closing %s failed", self.description)

    def _reconnect(self, reason: str) -> FrameSource | EndOfStream:
        """Reopen a dropped live source with backoff; an ``EndOfStream`` if stopped or given up."""
        self._retire_source()
        self._event("reconnect", f"{reason}; reconnecting")
        policy = self.config.reconnect
        down_since = time.monotonic()
        failures = 0
        while True:
            decision = policy.decide(failures, time.monotonic() - down_since)
            if decision.give_up:
                return EndOfStream("error", f"{self.description}: {decision.reason} ({reason})")
            if self.stop_event.wait(decision.delay_s):
                return EndOfStream("stopped", f"{self.description}: stopped while reconnecting")
            try:
                source = self._opener(self.config)
            except SourceError as err:
                failures += 1
                logger.warning("reconnection attempt %d failed: %s", failures, err)
                continue
            self._clock.restart()
            self._count("reconnects")
            down = time.monotonic() - down_since
            self._event("reconnected", f"reconnected to {self.description} after {down:.1f} s down")
            return source
