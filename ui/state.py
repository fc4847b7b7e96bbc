"""What the page shows, accumulated from the assistant's events. Pure: no Gradio, no model, no threads of its own.

One `LiveState` is subscribed to the `EventBus` and shared by every browser tab (there is one stream).
The model worker publishes into it; the page's timers read immutable `Snapshot`s from it. Version
counters let a tab skip re-sending what has not changed since its last refresh.

Stream time on the plots is cumulative across sources: when a new source starts (its clip index
starts again), its times are shifted by where the previous source stopped, so lines never run back.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

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
    seq: int = 0  # order of arrival in this page, for "show only turns after ..."
    round: int | None = None
    stream_time: float | None = None
    answer: str = ""
    done: bool = False
    error: str | None = None
    metrics: dict = field(default_factory=dict)  # ttft_s, decode_tokens_per_s, cache tokens, ...

    @property
    def queued(self) -> bool:
        return self.round is None and self.error is None


@dataclass(frozen=True)
class PlotPoint:
    """One point of the live plots. t: cumulative stream time (s); sizes in bytes; counts in tokens."""

    t: float
    cache_tokens: int
    budget: int
    tokens_seen: int
    kv_bytes: int
    full_kv_bytes: int  # what a cache that never evicts would hold (estimate: tokens_seen * bytes per token)
    memory_bytes: int | None
    store_bytes: int = 0  # the host store (tier 2, --recall), in host RAM or a folder


@dataclass(frozen=True)
class LogLine:
    t_wall: float
    kind: str  # "status", "error", "capture", "end"
    message: str


@dataclass(frozen=True, eq=False)
class Snapshot:
    """An immutable view of the live state; every render function takes one of these."""

    turns: tuple[Turn, ...] = ()
    preview: np.ndarray | None = None
    preview_time: float | None = None  # stream time of the preview frame (s)
    preview_clip: int | None = None
    points: tuple[PlotPoint, ...] = ()
    memory_label: str = ""
    memory_backend: str = ""
    log: tuple[LogLine, ...] = ()
    source: str | None = None  # what is being watched, None when idle
    stream_ended: str | None = None  # why the last stream ended
    stream_time: float = 0.0  # of the current source (s)
    clips: int = 0  # clips ingested in this process
    dropped_clips: int = 0
    cache_tokens: int = 0
    budget: int = 0
    store_tokens: int = 0  # host store (tier 2); 0 when recall is off
    store_bytes: int = 0
    store_oldest_time: float | None = None  # stream second of the oldest clip it holds
    chat_version: int = 0
    preview_version: int = 0
    plot_version: int = 0
    log_version: int = 0


class LiveState:
    """Accumulates events into what the page shows. Call it with each event (it is an EventBus subscriber).

    memory_sample: read on each clip and answer event; the plot's memory series. None: no memory series.
    """

    def __init__(self, memory_sample: MemorySampler | None = None, budget: int = 0) -> None:
        self._memory_sample = memory_sample
        self._lock = threading.Lock()
        self._turns: deque[Turn] = deque(maxlen=MAX_TURNS)
        self._open: Turn | None = None  # the turn being answered
        self._points: deque[PlotPoint] = deque(maxlen=MAX_POINTS)
        self._log: deque[LogLine] = deque(maxlen=MAX_LOG)
        self._snap = Snapshot(budget=budget)
        self._tokens_seen = 0
        self._t_offset = 0.0  # cumulative stream time where the current source started
        self._last_clip_index: int | None = None
        self._seq = 0

    # -- reading ------------------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        with self._lock:
            return self._snap

    # -- commands from the page (before the assistant acts on them) ---------------------------------

    def question_queued(self, question: str) -> None:
        """A person's question was handed to the assistant; shown as queued until its answer starts."""
        with self._lock:
            self._turns.append(Turn(question=question.strip(), auto=False, seq=self._next_seq()))
            self._changed(chat=True)

    def question_refused(self, question: str, message: str) -> None:
        """The assistant refused a question just queued with `question_queued`."""
        with self._lock:
            queued = self._find_queued(question)
            if queued is not None:
                self._replace_turn(queued, replace(queued, done=True, error=message))
                self._changed(chat=True)

    def memory_reset(self) -> None:
        """The person asked to forget everything: a cache that never evicts would be empty too."""
        with self._lock:
            self._tokens_seen = 0

    def note(self, kind: str, message: str, t_wall: float) -> None:
        """Adds a line to the activity log (for messages that are not assistant events)."""
        with self._lock:
            self._log.append(LogLine(t_wall, kind, message))
            self._changed(log=True)

    # -- events from the assistant (model worker thread) --------------------------------------------

    def __call__(self, event: dict) -> None:
        handler = getattr(self, f"_on_{event.get('type')}", None)
        if handler is None:
            return
        memory = self._memory_sample() if self._memory_sample and event["type"] in ("clip", "answer") else None
        with self._lock:
            handler(event, memory)

    def _on_clip(self, e: dict, memory: MemoryPoint | None) -> None:
        index = int(e.get("index", 0))
        if self._last_clip_index is not None and index <= self._last_clip_index:
            self._t_offset = self._points[-1].t if self._points else 0.0  # a new source started
        self._last_clip_index = index
        self._tokens_seen += int(e.get("prefill_tokens", e.get("visual_tokens", 0)))
        self._add_point(e, memory, cache_tokens=int(e["cache_tokens"]))
        preview = e.get("preview")
        self._snap = replace(
            self._snap,
            preview=preview if isinstance(preview, np.ndarray) else self._snap.preview,
            preview_time=float(e["stream_time"]),
            preview_clip=index,
            stream_time=float(e["stream_time"]),
            clips=self._snap.clips + 1,
            dropped_clips=int(e.get("dropped_clips", 0)),
            cache_tokens=int(e["cache_tokens"]),
            budget=int(e.get("budget", self._snap.budget)),
            store_tokens=int(e.get("store_tokens", 0)),
            store_bytes=int(e.get("store_bytes", 0)),
            store_oldest_time=e.get("store_oldest_time"),
            stream_ended=None,
        )
        self._changed(preview=True, plot=True)

    def _on_answer_start(self, e: dict, memory: MemoryPoint | None) -> None:
        question, auto = str(e["question"]), bool(e.get("auto"))
        turn = Turn(question=question, auto=auto, round=int(e["round"]), stream_time=float(e.get("stream_time", 0.0)))
        queued = None if auto else self._find_queued(question)
        if queued is None:
            turn = replace(turn, seq=self._next_seq())
            self._turns.append(turn)
        else:
            turn = replace(turn, seq=queued.seq)
            self._replace_turn(queued, turn)
        self._open = turn
        self._changed(chat=True)

    def _on_answer_piece(self, e: dict, memory: MemoryPoint | None) -> None:
        if self._open is None or self._open.round != e.get("round"):
            return
        self._update_open(replace(self._open, answer=self._open.answer + str(e.get("text", ""))))

    def _on_answer(self, e: dict, memory: MemoryPoint | None) -> None:
        keys = ("ttft_s", "decode_tokens_per_s", "cache_tokens_before", "cache_tokens_after", "cache_tokens_end")
        keys += ("evict_ms", "kv_bytes", "answer_tokens", "cut_off", "recalled_tokens", "recall_ms")
        metrics = {k: e[k] for k in keys if k in e}
        if self._open is not None and self._open.round == e.get("round"):
            self._update_open(
                replace(self._open, answer=str(e.get("answer", self._open.answer)), done=True, metrics=metrics)
            )
        self._open = None
        self._tokens_seen += int(e.get("prefill_tokens", 0)) + int(e.get("answer_tokens", 0))
        if "cache_tokens_end" in e:
            self._add_point(e, memory, cache_tokens=int(e["cache_tokens_end"]))
            self._snap = replace(self._snap, cache_tokens=int(e["cache_tokens_end"]))
            self._changed(plot=True)

    def _on_error(self, e: dict, memory: MemoryPoint | None) -> None:
        where, message = str(e.get("where", "")), str(e.get("message", ""))
        self._log.append(LogLine(float(e.get("t_wall", 0.0)), "error", f"{where}: {message}" if where else message))
        if where == "answer" and self._open is not None:
            self._update_open(replace(self._open, done=True, error=message))
            self._open = None
        elif where == "question":
            # the question was refused before its answer started; people's questions are refused in order
            queued = next((t for t in self._turns if t.queued), None)
            if queued is not None:
                self._replace_turn(queued, replace(queued, done=True, error=message))
                self._changed(chat=True)
        self._changed(log=True)

    def _on_status(self, e: dict, memory: MemoryPoint | None) -> None:
        message = str(e.get("message", ""))
        self._log.append(LogLine(float(e.get("t_wall", 0.0)), "status", message))
        if message.startswith("watching "):
            self._snap = replace(
                self._snap, source=message.removeprefix("watching "), stream_ended=None, stream_time=0.0
            )
        elif message in ("stream stopped", "assistant stopped"):
            self._snap = replace(self._snap, source=None, stream_ended=message)
        self._changed(log=True)

    def _on_capture(self, e: dict, memory: MemoryPoint | None) -> None:
        self._log.append(LogLine(float(e.get("t_wall", 0.0)), "capture", f"{e.get('kind')}: {e.get('message')}"))
        self._changed(log=True)

    def _on_end(self, e: dict, memory: MemoryPoint | None) -> None:
        why = str(e.get("message") or e.get("reason") or "the stream ended")
        self._log.append(LogLine(float(e.get("t_wall", 0.0)), "end", why))
        self._snap = replace(self._snap, source=None, stream_ended=why)
        self._changed(log=True)

    # -- helpers (called with the lock held) --------------------------------------------------------

    def _add_point(self, e: dict, memory: MemoryPoint | None, cache_tokens: int) -> None:
        kv_bytes = int(e.get("kv_bytes", 0))
        per_token = kv_bytes / cache_tokens if cache_tokens else 0.0
        self._points.append(
            PlotPoint(
                t=self._t_offset + float(e.get("stream_time", 0.0)),
                cache_tokens=cache_tokens,
                budget=int(e.get("budget", self._snap.budget)),
                tokens_seen=max(self._tokens_seen, cache_tokens),
                kv_bytes=kv_bytes,
                full_kv_bytes=int(per_token * max(self._tokens_seen, cache_tokens)),
                memory_bytes=None if memory is None else memory.used_bytes,
                store_bytes=int(e.get("store_bytes", 0)),
            )
        )
        if memory is not None:
            self._snap = replace(self._snap, memory_label=memory.label, memory_backend=memory.backend)

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _find_queued(self, question: str) -> Turn | None:
        return next((t for t in self._turns if t.queued and t.question == question.strip()), None)

    def _replace_turn(self, old: Turn, new: Turn) -> None:
        for i, turn in enumerate(self._turns):
            if turn is old:
                self._turns[i] = new
                return

    def _update_open(self, turn: Turn) -> None:
        self._replace_turn(self._open, turn)
        self._open = turn
        self._changed(chat=True)

    def _changed(self, chat: bool = False, preview: bool = False, plot: bool = False, log: bool = False) -> None:
        s = self._snap
        self._snap = replace(
            s,
            turns=tuple(self._turns) if chat else s.turns,
            points=tuple(self._points) if plot else s.points,
            log=tuple(self._log) if log else s.log,
            chat_version=s.chat_version + chat,
            preview_version=s.preview_version + preview,
            plot_version=s.plot_version + plot,
            log_version=s.log_version + log,
        )
