"""What the page on the head sends to the fleet: the page's commands (`ui.controls.AssistantCommands`) on top of the
`Coordinator`. Questions are routed to the stream's host (or to every host), streams added and removed; what the
fleet cannot do yet is refused with a message the page shows (a ValueError), and the fleet goes on unchanged."""

from __future__ import annotations

from bus.names import check_name
from capture import CaptureConfig
from fleet.coordinator import Coordinator
from watches.scheduler import StandingQuestion

NOT_IN_PLACE = "its cache lives on its host"


class FixedSchedule:
    """The first stream's standing question as the page shows it; the fleet's hosts hold their own copies, so
    it is not changed while the fleet runs."""

    def __init__(self, schedule: StandingQuestion) -> None:
        self._schedule = schedule

    @property
    def question(self) -> str:
        return self._schedule.question

    @property
    def every_s(self) -> float:
        return self._schedule.every_s

    @property
    def next_due_s(self) -> float:
        return self._schedule.next_due_s

    def update(self, question: str | None = None, every_s: float | None = None, now_s: float = 0.0) -> None:
        raise ValueError(
            "the fleet cannot change the standing question yet (each host holds its streams' own copy): set "
            "--question and --every, or question and every in a stream's [streams.NAME] table, and restart"
        )


class FleetCommands:
    """The page's commands for a fleet. `schedule` is the first configured stream's standing question (shown,
    not changed); `stream_time` that stream's latest time as its host reported it (seconds)."""

    def __init__(self, coordinator: Coordinator) -> None:
        self.coordinator = coordinator
        first = next(iter(coordinator.streams.values()), None)
        self._first = first.name if first is not None else None
        self.schedule = FixedSchedule(first.schedule if first is not None else coordinator.config.schedule)

    @property
    def done(self):
        """Set when the fleet's run ended (--max-rounds over the whole fleet)."""
        return self.coordinator.done

    @property
    def streams(self) -> list[str]:
        return list(self.coordinator.streams)

    @property
    def stream_time(self) -> float:
        return self.coordinator.tracking.stream_time.get(self._first or "", 0.0)

    def check_question(self, question: str) -> str:
        return self.coordinator.config.input_limits.check(question)

    def ask(self, question: str, stream: str | None = None) -> list[str]:
        """Routed to the stream's host (None: every host, for all of its streams). Returns the streams asked (a
        stream without a host then is not: the page marks its turn). ValueError saying why not."""
        return self.coordinator.ask(question, stream)

    def add_stream(self, name: str, capture_config: CaptureConfig) -> str:
        """The stream joins the fleet; the coordinator places it on a host with room (its panel then names the
        host). Only network sources: a file uploaded to the head, or a camera, lives on one box, and the stream
        may be placed on another. Returns what the page says of its memory."""
        name = check_name(name)
        if capture_config.spec.kind != "url":
            raise ValueError(
                "the fleet's page adds network streams only (rtsp or http(s) URLs): a file uploaded to the head or a "
                "camera lives on one box, and the stream may be placed on another; give those at start with "
                "--stream NAME=SOURCE (and node = ... in its [streams.NAME] table)"
            )
        self.coordinator.add_source(name, capture_config)
        return "decided by the host it is placed on (its panel names the host once it runs)"

    def remove_stream(self, name: str) -> None:
        self.coordinator.remove_stream(name)

    def watch(self, capture_config: CaptureConfig, stream: str | None = None) -> None:
        raise ValueError(
            f"the fleet cannot switch a stream's source in place yet ({NOT_IN_PLACE}): remove the stream and add "
            "it again with the new source"
        )

    def stop_stream(self, stream: str | None = None) -> None:
        raise ValueError(f"the fleet cannot stop a stream in place yet ({NOT_IN_PLACE}): remove it instead")

    def reset(self, stream: str | None = None) -> None:
        raise ValueError(
            f"the fleet cannot reset a stream's memory yet ({NOT_IN_PLACE}): remove the stream and add it again"
        )
