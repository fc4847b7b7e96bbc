"""What the page shows, accumulated from the assistant's events. Pure: no Gradio, no model, no threads of its own.

One `LiveState` is subscribed to the `EventBus` and shared by every browser tab. It keeps one `StreamView`
per watched stream (by the events' `stream` name; an event without one is the first stream's), one chat
whose turns name their stream, and the watches' alerts (ui.alerts). The model worker publishes into it; the
page's timers read immutable `Snapshot`s from it. Version counters let a tab skip re-sending what has not
changed since its last refresh.

Stream time on the plots is cumulative across sources: when a new source starts (its clip index
starts again), its times are shifted by where the previous source stopped, so lines never run back.
With several streams each plot point also has `t_run`, seconds since the first point, the shared time axis.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

from bus import (
    DEFAULT_STREAM,
    Answer,
    AnswerPiece,
    AnswerStart,
    AnswerStats,
    CaptureChange,
    Check,
    ClipEvent,
    End,
    ErrorEvent,
    Event,
    EvidenceSpan,
    Status,
    StatusKind,
    WarningEvent,
)
from bus import (
    Alert as AlertEvent,
)
from ui import stream_view
from ui.alerts import Alert, AlertBook
from ui.stream_view import StreamView

MAX_TURNS = 200  # chat turns kept for display (the log file keeps all of them)
MAX_POINTS = 7200  # plot points kept per series: 8 hours of 4-second clips
MAX_LOG = 50  # activity lines kept


@dataclass(frozen=True)
class MemoryPoint:
    """One memory reading for the plot: bytes, and what they measure (the monitor's label and backend)."""

    used_bytes: int
    label: str
    backend: str


MemorySampler = Callable[[], MemoryPoint]


@dataclass(frozen=True)
class Turn:
    """One question and its (possibly partial) answer. `round` is None while the question waits in the queue."""

    question: str
    auto: bool
    stream: str | None = None  # the stream it is about
    seq: int = 0  # order of arrival in this page, for "show only turns after ..."
    round: int | None = None
    stream_time: float | None = None
    answer: str = ""
    done: bool = False
    error: str | None = None
    stats: AnswerStats | None = None  # the answer's, once it is done (ttft_s, decode_tokens_per_s, cache tokens, ...)

    @property
    def evidence(self) -> tuple[EvidenceSpan, ...]:
        """What the answer drew on (none before it is done)."""
        return self.stats.evidence if self.stats is not None else ()

    @property
    def queued(self) -> bool:
        return self.round is None and self.error is None


@dataclass(frozen=True)
class PlotPoint:
    """One point of the live plots, of one stream. t: that stream's cumulative stream time (s); t_run: seconds
    since the page's first point (the axis shared by several streams); sizes in bytes; counts in tokens.
    total_kv_bytes: every stream's latest KV cache together."""

    t: float
    cache_tokens: int
    budget: int
    tokens_seen: int
    kv_bytes: int
    full_kv_bytes: int  # what a cache that never evicts would hold (estimate: tokens_seen * bytes per token)
    memory_bytes: int | None
    store_bytes: int = 0  # the host store (tier 2, --recall), in host RAM or a folder
    stream: str = DEFAULT_STREAM
    t_run: float = 0.0
    total_kv_bytes: int = 0
    total_store_bytes: int = 0
    visual_tokens: int | None = None  # a clip's visual tokens in full (None: an answer's point, or not said)
    visual_tokens_kept: int | None = None  # ... and how many entered the cache


@dataclass(frozen=True)
class LogLine:
    t_wall: float
    kind: str  # "status", "error", "capture", "end", "alert"
    message: str


@dataclass(frozen=True, eq=False)
class Snapshot:
    """An immutable view of the live state; every render function takes one of these.

    streams: one view per stream, in the assistant's order (the first is the default stream). The properties
    below are the first stream's, for the one-stream page."""

    streams: tuple[StreamView, ...] = (StreamView(DEFAULT_STREAM),)
    turns: tuple[Turn, ...] = ()
    points: tuple[PlotPoint, ...] = ()
    memory_label: str = ""
    memory_backend: str = ""
    log: tuple[LogLine, ...] = ()
    alerts: tuple[Alert, ...] = ()  # the latest alerts, newest first (ui.alerts.MAX_ALERTS of them)
    active_alerts: tuple[Alert, ...] = ()  # the alerts on now, oldest first: the banner
    chat_version: int = 0
    preview_version: int = 0  # counts frames of every stream
    plot_version: int = 0
    log_version: int = 0
    alerts_version: int = 0

    @property
    def multi(self) -> bool:
        return len(self.streams) > 1

    @property
    def default(self) -> StreamView:
        return self.streams[0]

    def stream(self, name: str) -> StreamView:
        return next(v for v in self.streams if v.name == name)

    @property
    def total_kv_bytes(self) -> int:
        return sum(v.kv_bytes for v in self.streams)

    def __getattr__(self, name: str):
        """The first stream's fields (preview, source, cache_tokens, ...) for the one-stream page."""
        if name in StreamView.__dataclass_fields__:
            return getattr(self.streams[0], name)
        raise AttributeError(name)


@dataclass
class _Track:
    """Per-stream bookkeeping for the plot (not shown as such)."""

    tokens_seen: int = 0
    t_offset: float = 0.0  # cumulative stream time where the current source started
    last_t: float = 0.0
    last_clip_index: int | None = None


def _visual_tokens(e: Event) -> dict:
    """A clip event's visual-token counts for its plot point; none when it lacks either (answers, older logs)."""
    if not isinstance(e, ClipEvent) or e.stats.visual_tokens is None or e.stats.visual_tokens_kept is None:
        return {}
    return dict(visual_tokens=int(e.stats.visual_tokens), visual_tokens_kept=int(e.stats.visual_tokens_kept))


class LiveState:
    """Accumulates events into what the page shows. Call it with each event (it is an EventBus subscriber).

    memory_sample: read on each clip and answer event; the plot's memory series. None: no memory series.
    streams: the streams' names in order (the first is the default); an event naming another adds it.
    """

    def __init__(
        self, memory_sample: MemorySampler | None = None, budget: int = 0, streams: Sequence[str] = ()
    ) -> None:
        names = list(dict.fromkeys(streams)) or [DEFAULT_STREAM]
        self._memory_sample = memory_sample
        self._budget = budget
        self._lock = threading.Lock()
        self._turns: deque[Turn] = deque(maxlen=MAX_TURNS)
        # the turns being answered, by stream: answers decoded together, and (the fleet) several hosts at once
        self._open: dict[str, Turn] = {}
        self._points: deque[PlotPoint] = deque(maxlen=MAX_POINTS)
        self._log: deque[LogLine] = deque(maxlen=MAX_LOG)
        self._alerts = AlertBook()
        self._snap = Snapshot(streams=tuple(StreamView(name, budget=budget) for name in names))
        self._tracks = {name: _Track() for name in names}
        self._t0: float | None = None  # wall time of the first plot point
        self._seq = 0

    def measure_memory(self, memory_sample: MemorySampler) -> None:
        """Plots `memory_sample`'s readings from now on (a door knows its monitor only once the assistant runs)."""
        self._memory_sample = memory_sample

    # -- reading ------------------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        with self._lock:
            return self._snap

    # -- commands from the page (before the assistant acts on them) ---------------------------------

    def question_queued(self, question: str, stream: str | None = None) -> list[str]:
        """A person's question was handed to the assistant for `stream` (None: every stream); shown as queued
        (one turn per stream) until its answer starts. Returns the streams it has a turn for."""
        with self._lock:
            names = self._targets(stream)
            for name in names:
                self._turns.append(Turn(question=question.strip(), auto=False, stream=name, seq=self._next_seq()))
            self._changed(chat=True)
            return names

    def question_refused(self, question: str, message: str, stream: str | None = None) -> None:
        """The assistant refused a question just queued with `question_queued` (same `stream`)."""
        with self._lock:
            for name in self._targets(stream):
                queued = self._find_queued(question, name)
                if queued is not None:
                    self._replace_turn(queued, replace(queued, done=True, error=message))
            self._changed(chat=True)

    def memory_reset(self, stream: str | None = None) -> None:
        """The person asked a stream (None: the first) to forget everything: a cache that never evicts would be
        empty too."""
        with self._lock:
            self._track(stream or self._snap.default.name).tokens_seen = 0

    def note(self, kind: str, message: str, t_wall: float) -> None:
        """Adds a line to the activity log (for messages that are not assistant events)."""
        with self._lock:
            self._log.append(LogLine(t_wall, kind, message))
            self._changed(log=True)

    # -- events from the assistant (model worker thread) --------------------------------------------

    def __call__(self, event: Event) -> None:
        handler = self._HANDLERS.get(type(event))
        if handler is None:
            return
        memory = self._memory_sample() if self._memory_sample and isinstance(event, (ClipEvent, Answer)) else None
        with self._lock:
            handler(self, event, memory)

    def _on_clip(self, e: ClipEvent, memory: MemoryPoint | None) -> None:
        name = self._name(e)
        track = self._track(name)
        index = int(e.index)
        if track.last_clip_index is not None and index <= track.last_clip_index:
            track.t_offset = track.last_t  # a new source started
        track.last_clip_index = index
        track.tokens_seen += int(e.stats.prefill_tokens)
        version = self._snap.preview_version + 1
        self._set_view(stream_view.on_clip(self._view(name), e, version))
        self._add_point(name, e, memory, cache_tokens=int(e.stats.cache_tokens))
        self._changed(preview=True, plot=True)

    def _on_answer_start(self, e: AnswerStart, memory: MemoryPoint | None) -> None:
        question, auto, name = e.question, bool(e.auto), self._name(e)
        turn = Turn(question=question, auto=auto, stream=name, round=int(e.round), stream_time=float(e.stream_time))
        queued = None if auto else self._find_queued(question, name)
        if queued is None:
            turn = replace(turn, seq=self._next_seq())
            self._turns.append(turn)
        else:
            turn = replace(turn, seq=queued.seq)
            self._replace_turn(queued, turn)
        self._open[name] = turn
        self._changed(chat=True)

    def _on_answer_piece(self, e: AnswerPiece, memory: MemoryPoint | None) -> None:
        turn = self._open_turn(e)
        if turn is None:
            return
        self._update_open(turn, replace(turn, answer=turn.answer + e.text))

    def _on_answer(self, e: Answer, memory: MemoryPoint | None) -> None:
        turn = self._open_turn(e)
        if turn is not None:
            self._update_open(turn, replace(turn, answer=e.answer, done=True, stats=e.stats))
        name = self._name(e)
        self._open.pop(name, None)
        self._track(name).tokens_seen += int(e.stats.prefill_tokens) + int(e.stats.answer_tokens)
        self._set_view(stream_view.on_answer(self._view(name), e))
        self._add_point(name, e, memory, cache_tokens=int(e.stats.cache_tokens_end))
        self._changed(plot=True)

    def _on_error(self, e: ErrorEvent, memory: MemoryPoint | None) -> None:
        where, message = e.where, e.message
        self._log.append(LogLine(float(e.t_wall), "error", self._labelled(e, where, message)))
        if where == "answer" and self._name(e) in self._open:
            turn = self._open.pop(self._name(e))
            self._update_open(turn, replace(turn, done=True, error=message))
        elif where == "question":
            # refused before its answer started; people's questions are refused in order, per stream
            name = self._name(e)
            queued = next((t for t in self._turns if t.queued and t.stream == name), None)
            if queued is not None:
                self._replace_turn(queued, replace(queued, done=True, error=message))
                self._changed(chat=True)
        self._changed(log=True)

    def _on_warning(self, e: WarningEvent, memory: MemoryPoint | None) -> None:
        message = self._labelled(e, e.where, e.message)
        self._log.append(LogLine(float(e.t_wall), "error", message))
        self._changed(log=True)

    def _on_check(self, e: Check, memory: MemoryPoint | None) -> None:
        self._set_view(stream_view.on_check(self._view(self._name(e)), e))

    def _on_alert(self, e: AlertEvent, memory: MemoryPoint | None) -> None:
        name = self._name(e)
        if not self._alerts.on_alert(e, name):
            return
        p_yes, what = float(e.p_yes), f"alert {e.alert}"
        if e.began:
            message = f"{what} began (p_yes {p_yes:.2f}): {e.question}"
        else:
            message = f"{what} ended after {float(e.duration_s or 0.0):.1f} s (p_yes {p_yes:.2f})"
        self._log.append(LogLine(float(e.t_wall), "alert", self._labelled(e, "", message)))
        self._changed(log=True, alerts=True)

    def _on_status(self, e: Status, memory: MemoryPoint | None) -> None:
        message = e.message
        self._log.append(LogLine(float(e.t_wall), "status", self._labelled(e, "", message)))
        stopped = e.kind is StatusKind.STOPPED
        if e.kind is StatusKind.STREAM_REMOVED and e.stream:
            self._remove_view(e.stream, e.t_wall)
            return
        if e.stream is None:  # the whole process: only its stop changes the streams
            names = [v.name for v in self._snap.streams] if stopped else []
        else:
            names = [self._name(e)]
        for name in names:
            self._set_view(stream_view.on_status(self._view(name), e))
        closed = stopped and self._alerts.close_stream(None, message, e.t_wall)
        self._changed(log=True, alerts=closed)

    def _on_capture(self, e: CaptureChange, memory: MemoryPoint | None) -> None:
        message = self._labelled(e, "", f"{e.kind}: {e.message}")
        self._log.append(LogLine(float(e.t_wall), "capture", message))
        name = self._name(e)
        self._set_view(stream_view.on_capture(self._view(name), e))
        self._changed(log=True)

    def _on_end(self, e: End, memory: MemoryPoint | None) -> None:
        why = e.message or e.reason or "the stream ended"
        self._log.append(LogLine(float(e.t_wall), "end", self._labelled(e, "", why)))
        self._set_view(stream_view.on_end(self._view(self._name(e)), why))
        closed = self._alerts.close_stream(self._name(e), "the stream ended", e.t_wall)
        self._changed(log=True, alerts=closed)

    _HANDLERS: ClassVar[dict[type[Event], Callable]] = {
        ClipEvent: _on_clip,
        AnswerStart: _on_answer_start,
        AnswerPiece: _on_answer_piece,
        Answer: _on_answer,
        ErrorEvent: _on_error,
        WarningEvent: _on_warning,
        Check: _on_check,
        AlertEvent: _on_alert,
        Status: _on_status,
        CaptureChange: _on_capture,
        End: _on_end,
    }

    # -- helpers (called with the lock held) --------------------------------------------------------

    def _name(self, e: Event) -> str:
        return e.stream or self._snap.default.name

    def _targets(self, stream: str | None) -> list[str]:
        return [v.name for v in self._snap.streams] if stream is None else [stream]

    def _labelled(self, e: Event, where: str, message: str) -> str:
        """`a · clip: message` with several streams; `clip: message` with one."""
        text = f"{where}: {message}" if where else message
        return f"{e.stream} · {text}" if self._snap.multi and e.stream else text

    def _track(self, name: str) -> _Track:
        return self._tracks.setdefault(name, _Track())

    def _view(self, name: str) -> StreamView:
        view = next((v for v in self._snap.streams if v.name == name), None)
        if view is None:  # a stream the page was not told about
            view = StreamView(name, budget=self._budget)
            self._snap = replace(self._snap, streams=(*self._snap.streams, view))
        return view

    def _remove_view(self, name: str, t_wall: float) -> None:
        """A removed stream leaves the page: its view, its plot bookkeeping and its open alerts."""
        streams = tuple(v for v in self._snap.streams if v.name != name)
        if streams:
            self._snap = replace(self._snap, streams=streams)
        self._tracks.pop(name, None)
        self._open.pop(name, None)
        closed = self._alerts.close_stream(name, "the stream was removed", t_wall)
        self._changed(log=True, alerts=closed)

    def _set_view(self, view: StreamView) -> None:
        streams = tuple(view if v.name == view.name else v for v in self._snap.streams)
        self._snap = replace(self._snap, streams=streams)

    def _open_turn(self, e: AnswerPiece | Answer) -> Turn | None:
        """The turn `e` belongs to: its stream's open turn, of the same round."""
        turn = self._open.get(self._name(e))
        return turn if turn is not None and turn.round == e.round else None

    def _add_point(self, name: str, e: ClipEvent | Answer, memory: MemoryPoint | None, cache_tokens: int) -> None:
        track = self._track(name)
        kv_bytes = int(e.stats.kv_bytes)
        per_token = kv_bytes / cache_tokens if cache_tokens else 0.0
        t_wall = float(e.t_wall)
        if self._t0 is None:
            self._t0 = t_wall
        track.last_t = track.t_offset + float(e.stream_time)
        self._points.append(
            PlotPoint(
                t=track.last_t,
                cache_tokens=cache_tokens,
                budget=int(getattr(e, "budget", 0) or self._view(name).budget),
                tokens_seen=max(track.tokens_seen, cache_tokens),
                kv_bytes=kv_bytes,
                full_kv_bytes=int(per_token * max(track.tokens_seen, cache_tokens)),
                memory_bytes=None if memory is None else memory.used_bytes,
                store_bytes=int(e.stats.store_bytes),
                stream=name,
                t_run=round(t_wall - self._t0, 3),
                total_kv_bytes=self._snap.total_kv_bytes,
                total_store_bytes=sum(v.clip.store_bytes for v in self._snap.streams),
                **_visual_tokens(e),
            )
        )
        if memory is not None:
            self._snap = replace(self._snap, memory_label=memory.label, memory_backend=memory.backend)

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _find_queued(self, question: str, stream: str) -> Turn | None:
        return next(
            (t for t in self._turns if t.queued and t.question == question.strip() and t.stream == stream), None
        )

    def _replace_turn(self, old: Turn, new: Turn) -> None:
        for i, turn in enumerate(self._turns):
            if turn is old:
                self._turns[i] = new
                return

    def _update_open(self, old: Turn, new: Turn) -> None:
        """Shows `new` in the chat in place of `old`, a turn being answered (still open: `new` is it now)."""
        self._replace_turn(old, new)
        if old.stream is not None and self._open.get(old.stream) is old:
            self._open[old.stream] = new
        self._changed(chat=True)

    def _changed(
        self, chat: bool = False, preview: bool = False, plot: bool = False, log: bool = False, alerts: bool = False
    ) -> None:
        s = self._snap
        self._snap = replace(
            s,
            turns=tuple(self._turns) if chat else s.turns,
            points=tuple(self._points) if plot else s.points,
            log=tuple(self._log) if log else s.log,
            alerts=self._alerts.latest if alerts else s.alerts,
            active_alerts=self._alerts.active if alerts else s.active_alerts,
            chat_version=s.chat_version + chat,
            preview_version=s.preview_version + preview,
            plot_version=s.plot_version + plot,
            log_version=s.log_version + log,
            alerts_version=s.alerts_version + alerts,
        )
