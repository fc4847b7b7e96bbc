"""The fleet's desk (bus.desk): what every front door (the page, the API, the terminal, the runtime watches) asks of
the running fleet, done on the head by the coordinator (the page's commands: fleet/page_commands.py). Questions go to
the stream's host with the API request's id (the answer's events carry it back through the head's bus, where the
API's feed and its questions in flight listen); streams are added (network sources only) and removed; the runtime
watches are held on the head (one registry and state file for the fleet) and sent to every host, which runs those
of its streams. A stream's view (state, clips, answers, lag) is what its host's events said, with the host."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bus import Answer, CaptureChange, ClipEvent, End, Event, EventBus, StreamState
from bus.desk import FLEET_ABILITIES, DeskStream
from capture import CaptureConfig
from fleet.coordinator import Coordinator
from fleet.page_commands import FleetCommands
from watches.spec import WatchSpec

WAITING = "waiting"  # a stream's state while it has no host (being placed, or its host was lost)


@dataclass
class Seen:
    """A stream as its host's events told it (the head's bus thread writes, request threads read)."""

    state: str = StreamState.WATCHING.value
    stream_time: float = 0.0
    clips: int = 0
    answers: int = 0
    lag_s: float = 0.0


class StreamsSeen:
    """Head bus subscriber: each stream's state, time, clips, answers and lag from its hosts' events."""

    def __init__(self) -> None:
        self.streams: dict[str, Seen] = {}

    def __call__(self, event: Event) -> None:
        if event.stream is None:
            return
        seen = self.streams.setdefault(event.stream, Seen())
        if isinstance(event, ClipEvent):
            seen.clips += 1
            seen.stream_time, seen.lag_s = event.stream_time, event.lag_s
            seen.state = StreamState.WATCHING.value
        elif isinstance(event, Answer):
            seen.answers += 1
        elif isinstance(event, CaptureChange) and event.state:
            seen.state = str(event.state)
        elif isinstance(event, End):
            seen.state = StreamState.ENDED.value

    def forget(self, name: str) -> None:
        self.streams.pop(name, None)


class FleetAssistant(FleetCommands):
    """The fleet's desk (bus.desk) on the head: the page's commands (FleetCommands: what the fleet cannot do is
    refused, `abilities` says so) and what the API and the runtime watches ask, over the coordinator."""

    abilities = FLEET_ABILITIES

    def __init__(self, coordinator: Coordinator, bus: EventBus) -> None:
        super().__init__(coordinator)
        self.bus = bus
        self.input_limits = coordinator.config.input_limits
        self.seen = StreamsSeen()
        bus.subscribe(self.seen)

    def close(self) -> None:
        self.bus.unsubscribe(self.seen)

    @property
    def rounds(self) -> int:
        return self.coordinator.tracking.rounds

    def desk_streams(self) -> dict[str, DeskStream]:
        """Every stream of the fleet, placed or waiting, in the order added, with its host (None: waiting)."""
        coordinator = self.coordinator  # copies: the coordinator's loop changes these meanwhile
        configs, owner, waiting = dict(coordinator.streams), dict(coordinator.owner), set(coordinator.waiting)
        specs = [*coordinator.config.watches, *coordinator.runtime_watches]
        views = {}
        for name, config in configs.items():
            seen = self.seen.streams.get(name) or Seen()
            views[name] = DeskStream(
                name=name,
                state=WAITING if name in waiting else seen.state,
                source=config.capture.spec.describe(),
                stream_time=seen.stream_time,
                clips=seen.clips,
                answers=seen.answers,
                lag_s=seen.lag_s,
                watches=tuple(spec.name for spec in specs if spec.watches(name)),
                host=owner.get(name),
            )
        return views

    def check_question(self, question: str) -> str:
        return self.input_limits.check(question)

    def ask(self, question: str, stream: str | None = None, request: str | None = None) -> list[str]:
        """Routed to the stream's host (None: every stream running on a host now); the streams asked."""
        return self.coordinator.ask(question, stream, request=request)

    def add_stream(self, name: str, capture_config: CaptureConfig) -> str:
        """As the fleet's page adds one: network sources only, placed by the coordinator where there is room."""
        admission = super().add_stream(name, capture_config)
        self.seen.forget(name)  # a name used before starts its counts again
        return admission

    def set_runtime_watches(
        self,
        specs: Sequence[WatchSpec],
        reasons: dict[str, str] | None = None,
        owners: dict[str, str] | None = None,
    ) -> None:
        self.coordinator.set_runtime_watches(specs, reasons, owners)
