"""The head of a fleet run, shared by its terminal and its page: the cluster joined, one bus with the head's displays
and writers (and the event log), the outputs (MQTT with its commands, webhooks, the timeline: once for the whole
fleet) and the coordinator started (a host on every box that offers one, the streams placed). `Head.close()` takes
it all down."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import ModuleType

from app.config import AppConfig
from app.startup import StartupError, start_publisher, start_timeline_writer
from bus import EventBus, Subscriber
from bus.delivery_marks import DeliveryMarks
from bus.worker import QueuedSubscriber
from fleet.cluster import FleetError, connect
from fleet.coordinator import Coordinator
from fleet.delivery import Delivery
from fleet.spools import head_folder
from outputs import OutputPublisher
from outputs.commands import CommandsSlot
from outputs.event_log import JsonlLog, queued_log
from timeline import TimelineError, TimelineWriter


@dataclass
class Head:
    """What runs on the head. coordinator: None until it was made (a start that failed before)."""

    ray: ModuleType
    bus: EventBus
    coordinator: Coordinator | None = None
    publisher: OutputPublisher | None = None
    timeline: TimelineWriter | None = None
    writers: list[QueuedSubscriber] = field(default_factory=list)
    log: JsonlLog | None = None
    marks: DeliveryMarks | None = None
    commands: CommandsSlot = field(default_factory=CommandsSlot)  # the outputs' commands, bound by the launcher

    def close(self) -> None:
        """Stops the hosts (their last events reach the outputs), then the outputs, the writers, and leaves Ray."""
        self.commands.unbind()  # commands arriving from now on are refused as not ready
        if self.coordinator is not None:
            self.coordinator.stop()
        for output in (self.publisher, self.timeline):
            if output is not None:
                self.bus.unsubscribe(output)
                output.close(timeout=5.0)
        for writer in self.writers:
            self.bus.unsubscribe(writer)
            writer.close(timeout=5.0)
        if self.log is not None:
            self.log.close()
        if self.marks is not None:
            self.marks.close()
        self.ray.shutdown()


def start_head(config: AppConfig, displays: Sequence[Subscriber] = (), writers: Sequence[Subscriber] = ()) -> Head:
    """Joins the cluster of `config.fleet` and starts the fleet. displays: called on the publishing thread (the
    page's state); writers: each behind its own queue and thread (the terminal's printer), as the event log.
    Every display is subscribed before the coordinator starts, so it sees the hosts join and the streams placed.
    StartupError (exit 2) with the reason when the timeline cannot be opened, no cluster answers or the fleet
    cannot start; nothing is left running then (nor when the start is interrupted)."""
    assert config.fleet is not None, "start_head needs config.fleet (--ray)"
    if config.timeline is not None:
        try:
            TimelineWriter(config.timeline).close()  # one that cannot be opened fails before anything starts
        except TimelineError as err:
            raise StartupError(str(err)) from err
    print(f"joining the Ray cluster at {config.fleet.address} ...", file=sys.stderr, flush=True)
    try:
        ray = connect(config.fleet.address)
    except FleetError as err:
        raise StartupError(str(err)) from err
    head = Head(ray, EventBus())
    try:
        for display in displays:
            head.bus.subscribe(display)
        head.log = JsonlLog(config.log_jsonl) if config.log_jsonl else None
        head.writers = [QueuedSubscriber("terminal", writer) for writer in writers]
        head.writers += [queued_log(head.log)] if head.log is not None else []
        for writer in head.writers:
            head.bus.subscribe(writer)
            writer.start()
        alerts = {s.name: [w.name for w in config.watches if w.watches(s.name)] for s in config.streams}
        head.publisher = start_publisher(config, alerts, head.bus, head.commands)
        head.timeline = start_timeline_writer(config, head.bus, None)
        head.marks = DeliveryMarks(head_folder())
        head.coordinator = Coordinator(config, config.fleet, head.bus, ray, Delivery(head.marks))
        print(f"starting a host on every box that offers one (model {config.model.model}) ...", file=sys.stderr)
        head.coordinator.start()
    except FleetError as err:
        head.close()
        raise StartupError(str(err)) from err
    except BaseException:  # StartupError (the timeline), or a signal while the hosts load
        head.close()
        raise
    return head
