"""The assistant's events: one frozen dataclass per type, every field named and typed.

Each event names its `stream` (None for events of the whole process) and `t_wall` (seconds since the epoch,
when it was made). `TYPE` is the name the event has in a record (the JSON-lines log, MQTT and webhook payloads,
the timeline): see `bus.records` for the one place that turns an event into a record and back.

Status events carry a `kind` (`StatusKind`) beside their text: whatever acts on a status (MQTT availability,
the page) matches on the kind; the text is for people and may be reworded.
"""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

from bus.receipt import Receipt
from bus.stats import AnswerStats, ClipStats, EvidenceSpan

DEFAULT_STREAM = "main"  # the name of the one stream of a run or page started without a named source


def now() -> float:
    """The wall clock as events carry it: seconds since the epoch, to the millisecond."""
    return round(time.time(), 3)


class StatusKind(enum.Enum):
    """What a status event says happened; its value is what a record holds."""

    READY = "ready"  # the assistant runs: every stream was started
    STOPPED = "stopped"  # the assistant stopped (its last event)
    RUN_FINISHED = "run_finished"  # every stream ended or was stopped
    MEMORY_MONITOR = "memory_monitor"  # which memory reading this run uses
    STREAM_ADDED = "stream_added"
    STREAM_WATCHING = "stream_watching"  # a stream's capture opened
    STREAM_STOPPED = "stream_stopped"
    STREAM_REMOVED = "stream_removed"
    MEMORY_RESET = "memory_reset"
    CLIP_CUT_OFF = "clip_cut_off"  # a clip's prefill was interrupted by the stop
    DURATION_REACHED = "duration_reached"  # --duration of stream time reached
    HOST_JOINED = "host_joined"  # the fleet (--ray): a host loaded the model and takes streams
    HOST_LOST = "host_lost"  # the fleet: a host (its process or its machine) is gone; its streams move
    STREAM_PLACED = "stream_placed"  # the fleet: a stream runs on a host (its `host` names it)
    STREAM_WAITING = "stream_waiting"  # the fleet: a stream has no host now (the message says why)
    INFO = "info"  # anything else (and a status record of an older log, which had no kind)


class StreamState(enum.StrEnum):
    """What a stream is doing (a record holds the value)."""

    IDLE = "idle"  # no source
    WATCHING = "watching"
    RECONNECTING = "reconnecting"  # its network source dropped; the capture tries again
    ENDED = "ended"
    REMOVED = "removed"


class CaptureKind(enum.StrEnum):
    """What changed in a stream's capture (a record holds the value)."""

    DROPPED = "reconnect"  # the source dropped; the capture reconnects (the value older records had)
    RECONNECTED = "reconnected"  # the source is back
    WARNING = "warning"  # something the capture went on after (bad packets)


class AlertState(enum.StrEnum):
    BEGIN = "begin"
    END = "end"


class WatchLifecycle(enum.StrEnum):
    SET = "set"  # the watch runs on the stream from now (set, changed, or kept from the last run)
    ENDED = "ended"  # for good: removed, expired, a one-shot that alerted, or changed to watch other streams


@dataclass(frozen=True, kw_only=True)
class Event:
    """Fields every event has. receipt: on a fleet's head, a spooled alert's or answer's (`bus.receipt`): the outputs
    that take the event hold it until they are done with it; never in a record."""

    TYPE: ClassVar[str] = ""
    LOGGED: ClassVar[bool] = True  # written to the event log (answer pieces are not: the answer event is whole)
    stream: str | None = None
    t_wall: float = field(default_factory=now)
    receipt: Receipt | None = field(default=None, repr=False, compare=False, metadata={"record": False})


@dataclass(frozen=True, kw_only=True)
class Status(Event):
    TYPE: ClassVar[str] = "status"
    kind: StatusKind = StatusKind.INFO
    message: str = ""
    host: str | None = None  # the fleet: the host it is about (STREAM_PLACED: the stream's; HOST_JOINED, HOST_LOST)


@dataclass(frozen=True, kw_only=True)
class ClipEvent(Event):
    """A clip entered a stream's cache: its place in the stream and what the session measured of it (`stats`).
    lag_s: seconds behind real time; dropped_*: dropped by the capture queue so far. preview: its last frame
    ([H, W, 3] uint8 RGB) for live displays, never written to a record."""

    TYPE: ClassVar[str] = "clip"
    index: int
    stream_time: float
    t_start: float = 0.0
    stats: ClipStats = field(default_factory=ClipStats)
    budget: int = 0
    lag_s: float = 0.0
    queued_clips: int = 0
    dropped_clips: int = 0
    dropped_frames: int = 0
    preview: Any = field(default=None, repr=False, compare=False)


@dataclass(frozen=True, kw_only=True)
class AnswerStart(Event):
    TYPE: ClassVar[str] = "answer_start"
    round: int
    question: str
    auto: bool = False
    stream_time: float = 0.0
    batch: int = 1
    request: str | None = None  # the id of the API request that asked it (None: the terminal, the page, auto)


@dataclass(frozen=True, kw_only=True)
class AnswerPiece(Event):
    """A piece of an answer as it is decoded (for live displays; not logged)."""

    TYPE: ClassVar[str] = "answer_piece"
    LOGGED: ClassVar[bool] = False
    round: int
    text: str
    request: str | None = None


@dataclass(frozen=True, kw_only=True)
class Answer(Event):
    """A finished answer: the round as the session measured it (`stats`, with its evidence) and, where a memory
    monitor runs, its reading. batch: how many streams' answers were decoded together."""

    TYPE: ClassVar[str] = "answer"
    stats: AnswerStats
    auto: bool = False
    stream_time: float = 0.0
    batch: int = 1
    memory_backend: str | None = None
    memory_label: str | None = None
    device_used_bytes: int | None = None
    device_total_bytes: int | None = None
    process_threads: int | None = None
    process_open_fds: int | None = None
    request: str | None = None  # the id of the API request that asked it

    @property
    def round(self) -> int:
        return self.stats.round

    @property
    def question(self) -> str:
        return self.stats.question

    @property
    def answer(self) -> str:
        return self.stats.answer

    @property
    def evidence(self) -> tuple[EvidenceSpan, ...]:
        return self.stats.evidence


@dataclass(frozen=True, kw_only=True)
class ErrorEvent(Event):
    """Something failed (where: the part, e.g. clip, question, answer, watch, store, timeline, outputs)."""

    TYPE: ClassVar[str] = "error"
    where: str
    message: str
    stream_time: float | None = None
    request: str | None = None  # the API request whose question failed


@dataclass(frozen=True, kw_only=True)
class WarningEvent(Event):
    TYPE: ClassVar[str] = "warning"
    where: str
    message: str


@dataclass(frozen=True, kw_only=True)
class CaptureChange(Event):
    """The capture of a stream changed (state: the stream's state after; "" in an older record that did not say)."""

    TYPE: ClassVar[str] = "capture"
    kind: CaptureKind | str  # a str: a kind this version does not know (a newer record)
    message: str
    state: StreamState | str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", _known(CaptureKind, self.kind))
        object.__setattr__(self, "state", _known(StreamState, self.state))


@dataclass(frozen=True, kw_only=True)
class End(Event):
    TYPE: ClassVar[str] = "end"
    reason: str = ""
    message: str = ""
    stream_time: float = 0.0


@dataclass(frozen=True, kw_only=True)
class Check(Event):
    """A watch's yes/no check of one clip."""

    TYPE: ClassVar[str] = "check"
    alert: str
    p_yes: float
    ms: float = 0.0
    stream_time: float = 0.0
    skipped_checks: int = 0


@dataclass(frozen=True, kw_only=True)
class Alert(Event):
    """A watch's alert began (with a JPEG snapshot of the clip's last frame, never in a record) or ended."""

    TYPE: ClassVar[str] = "alert"
    id: str
    alert: str
    state: AlertState
    p_yes: float = 0.0
    stream_time: float = 0.0
    question: str = ""
    snapshot: bytes | None = field(default=None, repr=False, compare=False)
    snapshot_bytes: int | None = None
    duration_s: float | None = None
    reason: str = ""  # why an alert ended other than by its watch ("one-shot", "host lost", "assistant stopped")

    @property
    def began(self) -> bool:
        return self.state is AlertState.BEGIN

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", AlertState(self.state))  # ValueError for neither begin nor end


@dataclass(frozen=True, kw_only=True)
class WatchEvent(Event):
    """A watch set while running began or stopped running on a stream (an alert that was on ended just before).
    alert: the watch's name, as its alerts name it. reason: why it ended ("removed", "expired", "one-shot")."""

    TYPE: ClassVar[str] = "watch"
    alert: str
    change: WatchLifecycle
    reason: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "change", WatchLifecycle(self.change))  # ValueError for neither set nor ended


@dataclass(frozen=True, kw_only=True)
class EventsDropped(Event):
    """The fleet: a host's outbox (bounded, drop oldest) dropped events before the head drained them. dropped: so
    far on that host; new: since the last report."""

    TYPE: ClassVar[str] = "events_dropped"
    host: str
    dropped: int
    new: int = 0


def _known(kind: type[enum.StrEnum], value: str) -> enum.StrEnum | str:
    """`value` as a member of `kind`, or as it is when `kind` has no such value (a newer record's)."""
    try:
        return kind(value)
    except ValueError:
        return value


EVENT_TYPES: dict[str, type[Event]] = {
    cls.TYPE: cls
    for cls in (
        Status,
        ClipEvent,
        AnswerStart,
        AnswerPiece,
        Answer,
        ErrorEvent,
        WarningEvent,
        CaptureChange,
        End,
        Check,
        Alert,
        WatchEvent,
        EventsDropped,
    )
}
