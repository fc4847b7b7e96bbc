"""The live assistant: a capture thread, the model worker thread and the standing-question scheduler.

Exactly one thread (the model worker) touches the model and the cache. Everything else talks to it
through its command queue: questions (people, in order), new streams, stop, reset. One `threading.Event`
stops everything; every thread is joined.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass

from app.events import EventBus, make_event
from app.scheduler import StandingQuestion
from cache.runner import PrefillInterrupted
from capture import CaptureConfig, CaptureThread, Clip, EndOfStream
from model.session import StreamingSession

logger = logging.getLogger(__name__)

_POLL_S = 0.05


@dataclass
class RunLimits:
    """When a run ends by itself: after `max_rounds` answers, after `duration_s` seconds of stream time,
    and (when `end_with_stream`) when the stream ends. 0 / None = no limit."""

    max_rounds: int = 0
    duration_s: float = 0.0
    end_with_stream: bool = True

    def __post_init__(self) -> None:
        if self.max_rounds < 0:
            raise ValueError(f"max_rounds must be >= 0 (0 = no limit), got {self.max_rounds}")
        if self.duration_s < 0:
            raise ValueError(f"duration must be >= 0 seconds (0 = no limit), got {self.duration_s}")


@dataclass
class _Question:
    text: str
    auto: bool


class Assistant:
    """Watches one stream at a time and answers questions about it.

    memory_sample: optional callable returning extra fields for answer events (the memory monitor).
    """

    def __init__(
        self,
        session: StreamingSession,
        schedule: StandingQuestion,
        bus: EventBus,
        limits: RunLimits | None = None,
        memory_sample: Callable[[], dict] | None = None,
    ) -> None:
        self.session = session
        self.schedule = schedule
        self.bus = bus
        self.limits = limits or RunLimits()
        self.memory_sample = memory_sample
        self.stop_event = threading.Event()
        self.done = threading.Event()  # set when the run has ended (limits, end of stream, stop)
        # a stop takes effect within one forward pass: between prefill chunks and decode steps
        session.stop_requested = self.stop_event.is_set
        self._commands: queue.Queue = queue.Queue()
        self._capture: CaptureThread | None = None
        self._stream_time = 0.0
        self._worker = threading.Thread(target=self._work, name="model-worker", daemon=True)

    # -- commands (any thread) ----------------------------------------------------------------------

    def start(self) -> None:
        self._worker.start()

    def watch(self, capture_config: CaptureConfig) -> None:
        """Switches to a new source. Opens it here, so a bad source raises `SourceError` to the caller and
        the current stream and the cache are untouched."""
        capture = CaptureThread(capture_config, threading.Event())
        self._commands.put(("watch", capture))

    def ask(self, question: str) -> None:
        """Queues a person's question; answered in arrival order, after the answer in progress."""
        if not isinstance(question, str) or not question.strip():
            raise ValueError("the question is empty: type a question about the stream")
        self._commands.put(("ask", _Question(question.strip(), auto=False)))

    def stop_stream(self) -> None:
        self._commands.put(("stop_stream", None))

    def reset(self) -> None:
        """Forgets everything seen so far (empty cache), keeps watching."""
        self._commands.put(("reset", None))

    def stop(self, timeout: float = 10.0) -> bool:
        """Stops every thread and joins them; True if all ended within `timeout` seconds."""
        self.stop_event.set()
        self._worker.join(timeout)
        return not self._worker.is_alive()

    @property
    def stream_time(self) -> float:
        return self._stream_time

    # -- the model worker ---------------------------------------------------------------------------

    def _work(self) -> None:
        self.bus.publish(make_event("status", message="assistant ready"))
        try:
            while not self.stop_event.is_set() and not self.done.is_set():
                self._handle_commands()
                if self._capture is None:
                    self._wait_for_command()
                    continue
                self._forward_capture_events()
                item = self._capture.get_clip(timeout=_POLL_S)
                if isinstance(item, Clip):
                    self._on_clip(item)
                elif isinstance(item, EndOfStream):
                    self._on_end(item)
        finally:
            self._close_capture()
            self.done.set()
            self.bus.publish(make_event("status", message="assistant stopped"))

    def _wait_for_command(self) -> None:
        try:
            command = self._commands.get(timeout=_POLL_S * 2)
        except queue.Empty:
            return
        self._run_command(*command)

    def _handle_commands(self) -> None:
        while True:
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return
            self._run_command(*command)
            if self.stop_event.is_set() or self.done.is_set():
                return

    def _run_command(self, name: str, payload) -> None:
        if name == "ask":
            self._answer(payload)
        elif name == "watch":
            self._close_capture()
            self._capture = payload
            self._capture.start()
            self.bus.publish(make_event("status", message=f"watching {payload.description}"))
        elif name == "stop_stream":
            self._close_capture()
            self.bus.publish(make_event("status", message="stream stopped"))
        elif name == "reset":
            self.session.reset()
            self.schedule.reset()
            self._stream_time = 0.0
            self.bus.publish(make_event("status", message="memory reset: the cache is empty"))

    def _on_clip(self, clip: Clip) -> None:
        try:
            metrics = self.session.ingest_clip(clip.frames, clip.t_start, clip.t_end)
        except PrefillInterrupted as stop:
            self.bus.publish(make_event("status", message=f"clip {clip.index} cut off by the stop ({stop})"))
            return
        except Exception as err:  # one bad clip must not end the stream
            logger.exception("clip %d failed", clip.index)
            self._error("clip", f"clip {clip.index} ({clip.t_start:.1f}-{clip.t_end:.1f}s) failed: {err}")
            return
        self._stream_time = clip.t_end
        self._report_store_errors()
        self.bus.publish(
            make_event(
                "clip",
                index=clip.index,
                stream_time=round(clip.t_end, 3),
                t_start=round(clip.t_start, 3),
                frames=metrics.frames,
                visual_tokens=metrics.visual_tokens,
                prefill_tokens=metrics.prefill_tokens,
                cache_tokens=metrics.cache_tokens,
                budget=self.session.cache_config.budget,
                evict_ms=round(metrics.evict_ms, 3),
                prefill_s=round(metrics.prefill_s, 4),
                kv_bytes=metrics.kv_bytes,
                store_tokens=metrics.store_tokens,
                store_bytes=metrics.store_bytes,
                store_dropped_tokens=metrics.store_dropped_tokens,
                store_oldest_time=metrics.store_oldest_time,
                dropped_clips=clip.dropped_clips,
                dropped_frames=clip.dropped_frames,
                preview=clip.frames[-1],
            )
        )
        question = self.schedule.due(clip.t_end)
        if question is not None:
            self._answer(_Question(question, auto=True))
        if self.limits.duration_s and clip.t_end >= self.limits.duration_s - 1e-6:
            self._finish(f"reached --duration {self.limits.duration_s:g}s of stream time")

    def _on_end(self, end: EndOfStream) -> None:
        self._forward_capture_events()
        self._close_capture()
        self.bus.publish(make_event("end", reason=end.reason, message=end.message, stream_time=self._stream_time))
        if self.limits.end_with_stream:
            self._handle_commands()  # questions already asked still get their answers
            self._finish("the stream ended")

    def _answer(self, question: _Question) -> None:
        round_index = self.session.rounds + 1
        try:
            pieces = self.session.ask(question.text)
        except ValueError as err:
            self._error("question", str(err))
            return
        self.bus.publish(
            make_event(
                "answer_start",
                round=round_index,
                question=question.text,
                auto=question.auto,
                stream_time=round(self._stream_time, 3),
            )
        )
        try:
            for piece in pieces:
                self.bus.publish(make_event("answer_piece", round=round_index, text=piece))
        except Exception as err:
            logger.exception("round %d failed", round_index)
            self._error("answer", f"round {round_index} failed: {err}")
            return
        self._report_store_errors()
        metrics = asdict(self.session.last_answer)
        extra = self.memory_sample() if self.memory_sample else {}
        self.bus.publish(
            make_event("answer", auto=question.auto, stream_time=round(self._stream_time, 3), **metrics, **extra)
        )
        if self.limits.max_rounds and self.session.rounds >= self.limits.max_rounds:
            self._finish(f"reached --max-rounds {self.limits.max_rounds}")

    def _forward_capture_events(self) -> None:
        if self._capture is None:
            return
        for event in self._capture.poll_events():
            if event.type == "error":
                self._error("capture", event.message)
            elif event.type != "end":
                self.bus.publish(make_event("capture", kind=event.type, message=event.message))

    def _report_store_errors(self) -> None:
        for message in self.session.take_store_errors():
            self._error("store", message)

    def _error(self, where: str, message: str) -> None:
        self.bus.publish(make_event("error", where=where, message=message, stream_time=self._stream_time))

    def _finish(self, reason: str) -> None:
        self.bus.publish(make_event("status", message=f"run finished: {reason}"))
        self.done.set()

    def _close_capture(self) -> None:
        if self._capture is not None:
            self._capture.close()
            self._capture = None
