"""The desk: what a front door (the page, the HTTP API, the terminal, the runtime watches) asks of a running
assistant, typed once. One box (`app.assistant.Assistant`) and the fleet (`fleet.api_assistant.FleetAssistant`, on
the head) each implement it; a door, a route or a registry written against it answers on both (tests/api/
test_api_desk.py). What one of them cannot do is said by its `abilities`, and refused with a ValueError saying why.

A stream is seen as a frozen `DeskStream`: what it is doing now, copied, so that a door never holds (or reaches
into) the live stream, its session or its capture."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from bus.bus import EventBus
from bus.input_limits import InputLimits

if TYPE_CHECKING:
    from capture import CaptureConfig
    from watches.spec import WatchSpec


@dataclass(frozen=True)
class DeskStream:
    """One stream as a front door shows it. state: idle | watching | reconnecting | ended | removed, a fleet's
    waiting (no host now); source: its description (not redacted: a door redacts what it sends); watches: the names
    of the watches it runs; first: the one-box run's first stream (the default of the page's buttons, never removed);
    host: a fleet's, the host it runs on (None: one box, or waiting)."""

    name: str
    state: str
    source: str | None
    stream_time: float
    clips: int
    answers: int
    lag_s: float
    watches: tuple[str, ...] = ()
    first: bool = False
    host: str | None = None


@dataclass(frozen=True)
class DeskAbilities:
    """What an assistant can do beyond the desk's common part. in_place: a stream's source switched, stopped or its
    memory reset where it runs (a fleet's cache lives on its host: no); standing_question: the first stream's
    standing question edited while running; local_sources: files and cameras as sources (a fleet: network streams
    only, the stream may be placed on another box)."""

    in_place: bool = True
    standing_question: bool = True
    local_sources: bool = True


ONE_BOX_ABILITIES = DeskAbilities()
FLEET_ABILITIES = DeskAbilities(in_place=False, standing_question=False, local_sources=False)


class Schedule(Protocol):
    """The first stream's standing question as a door shows and edits it (`watches.scheduler.StandingQuestion`)."""

    question: str
    every_s: float
    next_due_s: float

    def update(self, question: str | None = None, every_s: float | None = None, now_s: float = 0.0) -> None: ...


@runtime_checkable
class Desk(Protocol):
    """The typed surface of a running assistant, one box or a fleet (see the module). Refusals are ValueErrors
    (`bus.refusals`: AssistantBusy when too much waits, AdmissionError when a stream does not fit), or
    `capture.SourceError` for a source that cannot be opened."""

    bus: EventBus
    input_limits: InputLimits
    abilities: DeskAbilities
    schedule: Schedule  # the first stream's standing question

    @property
    def rounds(self) -> int:  # answers given, every stream together
        ...

    @property
    def stream_time(self) -> float:  # the first stream's latest time, seconds
        ...

    def desk_streams(self) -> dict[str, DeskStream]:  # every stream, in the order added
        ...

    def check_question(self, question: str) -> str:  # stripped; ValueError when empty or too long
        ...

    def ask(self, question: str, stream: str | None = None, request: str | None = None) -> list[str]:
        ...

    def add_stream(self, name: str, capture_config: CaptureConfig) -> str:  # the admission line
        ...

    def remove_stream(self, name: str) -> None:
        ...

    def watch(self, capture_config: CaptureConfig, stream: str | None = None) -> None:  # a new source in place
        ...

    def stop_stream(self, stream: str | None = None) -> None:
        ...

    def reset(self, stream: str | None = None) -> None:  # the stream's memory emptied
        ...

    def set_runtime_watches(
        self,
        specs: Iterable[WatchSpec],
        reasons: Mapping[str, str] | None = None,
        owners: Mapping[str, str] | None = None,
    ) -> None:
        ...
