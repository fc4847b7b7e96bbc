"""The live assistant: capture threads (one per stream), the model worker thread and the standing questions.

Exactly one thread (the model worker) touches the model and the caches. Everything else talks to it through
two bounded queues: one of commands (new sources, new streams, stop, reset) and one of people's questions (in
order; when full, one more is refused as busy, `AssistantBusy`). The worker serves the streams round-robin, one
clip of each per turn from each stream's own bounded capture queue (drop oldest, counted per stream); after each
stream's clip it runs every command and answers at most `InputLimits.per_clip` questions, so a flood of
questions never starves the video. One `threading.Event` stops everything; every
thread is joined. Every event names its `stream` (None for events of the whole process).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from app.answering import Answerer, Notes, Question
from app.capture_events import CaptureEvents
from app.clip_publisher import ClipPublisher
from app.run_limits import RunLimits
from app.runtime_watch_apply import REMOVED, STOPPED, STREAM_STOPPED, apply_runtime_watches, end_open_alerts
from app.stream import Stream, open_capture
from app.stream_events import StreamEvents
from app.streams import check_name
from app.watch_checks import CheckBudget, run_checks
from app.worker_commands import (
    AddStream,
    Command,
    RemoveStream,
    ResetStream,
    SetRuntimeWatches,
    StopStream,
    WatchSource,
    opened_capture,
)
from bus import End, EventBus, Status, StatusKind, StreamState
from bus.desk import ONE_BOX_ABILITIES, DeskStream
from bus.input_limits import AssistantBusy, InputLimits
from cache.runner import PrefillInterrupted
from capture import CaptureConfig, CaptureThread, Clip, EndOfStream
from watches.gate import clip_changed
from watches.scheduler import StandingQuestion
from watches.spec import WatchSpec

if TYPE_CHECKING:
    from app.stream_factory import StreamFactory

logger = logging.getLogger(__name__)

_POLL_S = 0.05
_MAX_COMMANDS = 64  # commands (not questions) waiting for the worker; one more is refused as busy


class Assistant:
    """Watches one or more streams with one model and answers questions about each.

    streams: each with its own session (device cache + host store), standing question and, once `watch` is
    called, capture. The first is the default target of `watch`, `stop_stream`, `reset` and of the page's
    standing-question box (`schedule`). memory_sample: optional callable returning extra fields for answer
    events (the memory monitor). factory: builds the streams `add_stream` adds (None: none can be added).
    input_limits: how long a question may be and how many may wait (bus/input_limits.py). first_stays: the first
    stream cannot be removed (the page's buttons act on it); False (a fleet host, which has no page): removing it
    makes the next stream the default, and only the last stream stays.

    `streams` is replaced, never changed in place, when a stream is added: a thread that reads it sees the
    streams before or after, whole.
    """

    abilities = ONE_BOX_ABILITIES  # everything a door may ask (bus.desk)

    def __init__(
        self,
        streams: list[Stream],
        bus: EventBus,
        limits: RunLimits | None = None,
        memory_sample: Callable[[], dict] | None = None,
        notes: Notes | None = None,
        factory: StreamFactory | None = None,
        input_limits: InputLimits | None = None,
        first_stays: bool = True,
    ) -> None:
        if not streams:
            raise ValueError("the assistant needs at least one stream")
        self.streams = {stream.name: stream for stream in streams}
        if len(self.streams) != len(streams):
            raise ValueError("every stream needs its own name")
        self.default = streams[0]
        self.schedule = self.default.schedule
        self.bus = bus
        self.limits = limits or RunLimits()
        self.stop_event = threading.Event()
        self.done = threading.Event()  # set when the run has ended (limits, end of streams, stop)
        self.rounds = 0  # answers given, all streams together
        for stream in streams:
            # a stop takes effect within one forward pass: between prefill chunks and decode steps
            stream.session.stop_requested = self.stop_event.is_set
        self.input_limits = input_limits or InputLimits()
        self.first_stays = first_stays
        self._commands: queue.Queue = queue.Queue(maxsize=_MAX_COMMANDS)
        self._questions: queue.Queue = queue.Queue(maxsize=self.input_limits.max_pending)
        self._wakeup = threading.Event()  # set when either queue gets something
        self._events = StreamEvents(bus)
        self._answerer = Answerer(self._events, notes, memory_sample, stopping=self._ending)
        self._capture_events = CaptureEvents(self._events)
        self._clips = ClipPublisher(self._events, lambda: self.streams.values())
        self._factory = factory
        self._adding = threading.Lock()  # one stream added at a time: names and admission see the ones before
        self._removing = threading.Lock()  # a removal is done once, by the worker or by the caller
        self._runtime_watches: tuple[WatchSpec, ...] = ()  # set while running; the worker's own
        self._runtime_owners: dict[str, str] = {}  # who set each of them (watch name -> owner), the worker's own
        self._worker = threading.Thread(target=self._work, name="model-worker", daemon=True)

    # -- commands (any thread) ----------------------------------------------------------------------

    def start(self) -> None:
        self._worker.start()

    def watch(self, capture_config: CaptureConfig, stream: str | None = None, allow_down: bool = False) -> None:
        """Switches a stream (default: the first) to a new source. Opens it here, so a bad source raises
        `SourceError` to the caller and that stream and its cache are untouched. With `allow_down`, a network
        source that is down starts in "reconnecting" (an error event) instead."""
        target = self._stream(stream)
        capture, down = open_capture(capture_config, allow_down)
        try:
            self._command(WatchSource(target, capture, down))
        except ValueError:
            capture.close()
            raise

    def add_stream(
        self,
        name: str,
        capture_config: CaptureConfig,
        allow_down: bool = True,
        schedule: StandingQuestion | None = None,
    ) -> str:
        """Adds a stream named `name` watching `capture_config` while the assistant runs (any thread); returns the
        admission line. schedule: its own standing question (None: the run's). Refused, changing nothing, as
        `StreamFactory.new_stream` says (ValueError, AdmissionError, SourceError). Its session is built here,
        before any other thread sees it; the worker starts its capture."""
        if self._factory is None:
            raise ValueError("this assistant cannot add streams (it was built without a stream factory)")
        with self._adding:
            if self._ending():
                raise ValueError("the assistant has stopped: no stream can be added")
            new = self._factory.new_stream(name, self.streams, capture_config, allow_down, schedule)
            new.stream.session.stop_requested = self.stop_event.is_set
            before, self.streams = self.streams, {**self.streams, name: new.stream}
            try:
                self._command(AddStream(new.stream, new.capture, new.down, new.admission))
            except ValueError:
                self.streams = before
                new.capture.close()
                raise
        return new.admission

    def desk_streams(self) -> dict[str, DeskStream]:
        """Every stream as the front doors see it (bus.desk): a frozen copy of what it is doing now."""
        return {name: desk_stream(stream, stream is self.default) for name, stream in list(self.streams.items())}

    def check_question(self, question: str) -> str:
        """The question as it would be asked (stripped); ValueError when it is empty or longer than
        --max-question-chars. Nothing is queued."""
        return self.input_limits.check(question)

    def remove_stream(self, name: str, timeout: float = 30.0) -> None:
        """Stops and forgets the stream named `name` (any thread): its capture thread is joined, its session (cache
        and host store) dropped, a `status` event of kind STREAM_REMOVED published, and its room (--max-streams,
        admission) returned. Returns once that is done (or after `timeout` seconds, the worker busy with a long
        answer: it is done then at the worker's next command). ValueError for an unknown name, the first stream
        (the default of the page's buttons and standing question; stop it instead) unless not `first_stays`, and the
        only stream; AssistantBusy (nothing changed) when too many commands wait."""
        with self._adding:
            if self._ending():
                raise ValueError("the assistant has stopped: no stream can be removed")
            stream = self._stream(check_name(name))
            others = {n: s for n, s in self.streams.items() if s is not stream}
            if stream is self.default and self.first_stays:
                raise ValueError(f"stream {name!r} is the first stream and cannot be removed; stop it instead")
            if not others:
                raise ValueError(f"stream {name!r} is the only stream and cannot be removed; stop the assistant")
            before = self.streams, self.default, self.schedule
            if stream is self.default:
                self.default = next(iter(others.values()))
                self.schedule = self.default.schedule
            self.streams = others
            done = threading.Event()
            try:
                self._command(RemoveStream(stream, done))
            except AssistantBusy:
                self.streams, self.default, self.schedule = before
                raise
        deadline = time.monotonic() + timeout
        while not done.wait(_POLL_S):
            if not self._worker.is_alive():  # never started, or ended before it got to the command
                self._remove(stream, done)
            elif time.monotonic() > deadline:
                return

    def ask(self, question: str, stream: str | None = None, request: str | None = None) -> list[str]:
        """Queues a person's question for one stream, or for every stream (None); answered in arrival order,
        after the answer in progress, at most `per_clip` of them between two clips while clips are waiting.
        Refused before anything is queued (ValueError) when it is empty or too long, or (`AssistantBusy`)
        when --max-pending-questions are already waiting. request: an id its events carry (the API's).
        Returns the names of the streams asked."""
        text = self.check_question(question)
        targets = list(self.streams.values()) if stream is None else [self._stream(stream)]
        try:
            self._questions.put_nowait([Question(s, text, auto=False, request=request) for s in targets])
        except queue.Full:
            raise self.input_limits.busy() from None
        self._wakeup.set()
        return [s.name for s in targets]

    def set_runtime_watches(
        self,
        specs: Sequence[WatchSpec],
        reasons: dict[str, str] | None = None,
        owners: Mapping[str, str] | None = None,
    ) -> None:
        """Replaces the watches set while running (watches.runtime) by `specs`, on every stream they watch,
        next to the configured ones (any thread; the worker applies it between clips). reasons: why a watch went
        (by name: "expired", "one-shot"), said in the end of its alert if it was on. owners: who set each (by
        name), so that one owner's many watches never hold back another's checks (app/watch_checks.py).
        AssistantBusy when too many commands wait."""
        self._command(SetRuntimeWatches(tuple(specs), dict(reasons or {}), dict(owners or {})))

    def stop_stream(self, stream: str | None = None) -> None:
        self._command(StopStream(self._stream(stream)))

    def reset(self, stream: str | None = None) -> None:
        """Forgets everything a stream (default: the first) has seen (empty cache), keeps watching."""
        self._command(ResetStream(self._stream(stream)))

    def stop(self, timeout: float = 10.0) -> bool:
        """Stops every thread and joins them; True if all ended within `timeout` seconds (at once if it never
        started: a door that failed before `start`)."""
        self.stop_event.set()
        if self._worker.ident is None:
            return True
        self._worker.join(timeout)
        return not self._worker.is_alive()

    @property
    def stream_time(self) -> float:
        """The default stream's time (seconds)."""
        return self.default.stream_time

    def _command(self, command: Command) -> None:
        """Queues `command` for the worker without waiting: AssistantBusy when the queue is full."""
        try:
            self._commands.put_nowait(command)
        except queue.Full:
            raise AssistantBusy(
                f"busy: {_MAX_COMMANDS} commands are already waiting for the model; try again in a moment"
            ) from None
        self._wakeup.set()

    def _stream(self, name: str | None) -> Stream:
        if name is None:
            return self.default
        if name not in self.streams:
            raise ValueError(f"no stream named {name!r}; streams: {', '.join(self.streams)}")
        return self.streams[name]

    # -- the model worker ---------------------------------------------------------------------------

    def _work(self) -> None:
        self._status(None, StatusKind.READY, "assistant ready")
        try:
            while not self._ending():
                self._handle_commands(questions=0)
                if self._ending():
                    break
                if not self._serve_streams():
                    self._wait_for_command()
        finally:
            with self._adding:  # no stream is added any more
                self.done.set()
            for stream in self.streams.values():
                stream.close_capture()
                end_open_alerts(stream, STOPPED, self._events)  # before the outputs close (Home Assistant: off)
            self._close_unstarted()
            self._status(None, StatusKind.STOPPED, "assistant stopped")

    def _close_unstarted(self) -> None:
        """Closes the sources of new captures that were still queued when the worker ended."""
        while True:
            try:
                command = self._commands.get_nowait()
            except queue.Empty:
                return
            capture = opened_capture(command)
            if capture is not None:
                capture.close()
            elif isinstance(command, RemoveStream):
                self._remove(command.stream, command.done)

    def _ending(self) -> bool:
        return self.stop_event.is_set() or self.done.is_set()

    def _serve_streams(self) -> bool:
        """One round-robin turn: at most one clip of each stream; standing questions that fell due in the turn
        are answered at its end. Returns whether anything was served."""
        served, due = False, []
        for stream in list(self.streams.values()):
            if stream.capture is None:
                continue
            self._capture_events.forward(stream)
            item = stream.capture.get_clip(timeout=0)
            if isinstance(item, Clip):
                served = True
                question = self._on_clip(stream, item)
                if question is not None:
                    due.append(Question(stream, question, auto=True))
            elif isinstance(item, EndOfStream):
                served = True
                self._on_end(stream, item)
            self._handle_commands(self.input_limits.per_clip)  # a few people's questions before the next clip
            if self._ending():
                return served
        if due:
            self._answer_all(due)
        self._check_end()
        return served

    def _wait_for_command(self) -> None:
        """No clip was waiting: sleeps until a command or question comes (at most _POLL_S) and runs them."""
        if self._commands.empty() and self._questions.empty():
            self._wakeup.wait(_POLL_S)
        self._wakeup.clear()
        self._handle_commands(self.input_limits.per_clip)

    def _handle_commands(self, questions: int | None) -> None:
        """Runs every waiting command, and answers up to `questions` waiting questions (None: all of them),
        each after the commands that came before it was taken."""
        answered = 0
        while not self._ending():
            command = _take(self._commands)
            if command is not None:
                self._run_command(command)
                continue
            if questions is not None and answered >= questions:
                return
            batch = _take(self._questions)
            if batch is None:
                return
            answered += 1
            self._answer_all(batch)

    def _run_command(self, command: Command) -> None:
        """Runs one command on the worker, by its type (app/worker_commands.py)."""
        match command:
            case WatchSource(stream, capture, down):
                self._start_capture(stream, capture, down)
            case AddStream(stream, capture, down, admission):
                self._status(stream, StatusKind.STREAM_ADDED, f"stream added; memory: {admission}")
                apply_runtime_watches(stream, (), self._runtime_watches, self._events, owners=self._runtime_owners)
                self._start_capture(stream, capture, down)
            case SetRuntimeWatches(specs, reasons, owners):
                for each in list(self.streams.values()):
                    apply_runtime_watches(each, self._runtime_watches, specs, self._events, dict(reasons), owners)
                self._runtime_watches, self._runtime_owners = specs, dict(owners)
            case RemoveStream(stream, done):
                self._remove(stream, done)
            case StopStream(stream):
                stream.close_capture()
                end_open_alerts(stream, STREAM_STOPPED, self._events)  # no clip comes to end them (Home Assistant)
                stream.state = StreamState.IDLE
                self._status(stream, StatusKind.STREAM_STOPPED, "stream stopped")
            case ResetStream(stream):
                stream.session.reset()
                stream.schedule.reset()
                stream.stream_time = 0.0
                self._status(stream, StatusKind.MEMORY_RESET, "memory reset: the cache is empty")
            case _:
                raise TypeError(f"not an assistant command: {command!r}")

    def _remove(self, stream: Stream, done: threading.Event) -> None:
        """Joins the removed stream's capture, empties its session and forgets every reference to it."""
        with self._removing:
            if done.is_set():
                return
            stream.close_capture()
            end_open_alerts(stream, REMOVED, self._events)  # no check will end them (Home Assistant: off)
            stream.session.reset()  # its host store's blocks (and files) go now; its buffers with the session
            self._answerer.forget(stream.name)
            stream.state, stream.finished = StreamState.REMOVED, True
            self._status(stream, StatusKind.STREAM_REMOVED, "stream removed")
            done.set()

    def _start_capture(self, stream: Stream, capture: CaptureThread, down: str | None) -> None:
        stream.close_capture()
        stream.capture, stream.finished = capture, False
        stream.state = StreamState.RECONNECTING if down else StreamState.WATCHING
        capture.start()
        self._status(stream, StatusKind.STREAM_WATCHING, f"watching {capture.description}")
        if down:
            self._capture_events.started_down(stream, capture.description, down)

    def _on_clip(self, stream: Stream, clip: Clip) -> str | None:
        """Ingests a clip; returns the standing question if it fell due."""
        try:
            # the first clip of a capture and the first after a reconnection enter whole (a key frame)
            whole = clip.index == 0 or clip.stats.reconnects != stream.reconnects_seen
            stream.reconnects_seen = clip.stats.reconnects
            stats = stream.session.ingest_clip(clip.frames, clip.t_start, clip.t_end, whole=whole)
        except PrefillInterrupted as stop:
            self._status(stream, StatusKind.CLIP_CUT_OFF, f"clip {clip.index} cut off by the stop ({stop})")
            return None
        except Exception as err:  # one bad clip must not end the stream
            logger.exception("%s: clip %d failed", stream.name, clip.index)
            self._events.error(
                stream, "clip", f"clip {clip.index} ({clip.t_start:.1f}-{clip.t_end:.1f}s) failed: {err}"
            )
            return None
        stream.stream_time, stream.state, stream.clips = clip.t_end, StreamState.WATCHING, stream.clips + 1
        self._events.store_errors(stream)
        self._clips.publish(stream, clip, stats)
        budget = CheckBudget(
            self.input_limits.checks_per_clip,
            self.input_limits.check_budget_ms(clip.t_end - clip.t_start, len(self.streams)),
        )
        run_checks(stream, clip, self._events, clip_changed(stats.visual_tokens_changed), budget)
        if self.limits.duration_s and clip.t_end >= self.limits.duration_s - 1e-6:
            stream.finished = True
            stream.close_capture()
            self._status(
                stream, StatusKind.DURATION_REACHED, f"reached --duration {self.limits.duration_s:g}s of stream time"
            )
        return stream.schedule.due(clip.t_end)

    def _on_end(self, stream: Stream, end: EndOfStream) -> None:
        self._capture_events.forward(stream)
        stream.close_capture()
        stream.state, stream.finished = StreamState.ENDED, True
        self._events.publish(End, stream, reason=end.reason, message=end.message, stream_time=stream.stream_time)
        if self.limits.end_with_stream and self._all_finished():
            self._handle_commands(questions=None)  # questions already asked still get their answers

    def _check_end(self) -> None:
        if not (self.limits.duration_s or self.limits.end_with_stream) or not self._all_finished():
            return
        self._handle_commands(questions=None)  # questions people asked before the end are still answered
        if self.limits.duration_s:
            self._finish(f"reached --duration {self.limits.duration_s:g}s of stream time")
        else:
            self._finish("the stream ended" if len(self.streams) == 1 else "every stream ended")

    def _all_finished(self) -> bool:
        watched = [s for s in self.streams.values() if s.capture is not None or s.finished]
        return bool(watched) and all(s.finished for s in watched)

    def _answer_all(self, questions: list[Question]) -> None:
        """Answers them (one per stream; several at once as one batch) and applies --max-rounds."""
        questions = [q for q in questions if self.streams.get(q.stream.name) is q.stream]  # not removed ones
        if not questions:
            return
        self.rounds += self._answerer.answer(questions)
        if self.limits.max_rounds and self.rounds >= self.limits.max_rounds:
            self._finish(f"reached --max-rounds {self.limits.max_rounds}")

    def _status(self, stream: Stream | None, kind: StatusKind, message: str) -> None:
        self._events.publish(Status, stream, kind=kind, message=message)

    def _finish(self, reason: str) -> None:
        self._status(None, StatusKind.RUN_FINISHED, f"run finished: {reason}")
        self.done.set()


def desk_stream(stream: Stream, first: bool) -> DeskStream:
    """`stream` now, as a front door sees it."""
    capture = stream.capture
    return DeskStream(
        name=stream.name,
        state=str(stream.state),
        source=capture.description if capture is not None else None,
        stream_time=stream.stream_time,
        clips=stream.clips,
        answers=stream.answers,
        lag_s=stream.lag_s,
        watches=tuple(watch.spec.name for watch in list(stream.watches)),
        first=first,
    )


def _take(waiting: queue.Queue):
    """The next item of `waiting`, or None when it is empty."""
    try:
        return waiting.get_nowait()
    except queue.Empty:
        return None
