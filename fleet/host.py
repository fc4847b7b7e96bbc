"""A host: the body of one Ray actor per box or GPU. It loads the model once and runs the assistant you know
(several streams, answers decoded together, watches) for the streams the coordinator places on it.

Its alerts and answers are written to its spool first (fleet/spools.py: a file on the box, so a host's death
loses none; the head acknowledges what it delivered); its other events go to a bounded outbox (the oldest dropped
and counted when full). The coordinator drains both every few tenths of a second; nothing here publishes to MQTT
or writes the timeline (the head does, once): only an output registered to run on every host
(`OutputKind.head_only=False`, outputs/registry.py) runs here too. Events of the host as a whole (ready, stopped,
warnings) are renamed for the fleet: `host NAME: ...`, status kind INFO, so that one host's "assistant stopped"
never reads as the fleet's. This class imports no Ray: the coordinator makes it an actor (`ray.remote(FleetHost)`,
several calls at once: a drain that waits for events never holds up a question), and a test or a benchmark may
run it in-process.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import socket
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from app.assistant import Assistant, RunLimits
from app.config import AppConfig, StreamConfig
from app.startup import memory_fields, start_publisher, stream_factory
from app.stream_factory import StreamFactory
from bus import Alert, Answer, DropOldestQueue, ErrorEvent, Event, EventBus, Status, StatusKind, WarningEvent
from bus.redact import redacted
from bus.refusals import AdmissionError
from cache.attention import register_attention
from fleet.spools import HostSpools, spool_folder
from fleet.wire import HostInfo, to_wire
from model.loading import load_model
from monitor.memory_monitor import MemoryMonitor
from watches.spec import WatchSpec

logger = logging.getLogger(__name__)

OUTBOX = 4096  # events waiting for the coordinator (at 0.2 s a drain, minutes of a busy host's events)
DURABLE = (Alert, Answer)  # what the spool keeps until the head acknowledges it (the rest may be skipped)


def room_for(factory: StreamFactory, max_streams: int) -> int:
    """How many streams fit next to the model: the admission arithmetic against the memory free now, at most
    `max_streams` (0 when not even one fits)."""
    room = 0
    for streams in range(1, max_streams + 1):
        try:
            factory.admit(streams)
        except AdmissionError:
            break
        room = streams
    return room


class FleetHost:
    """Runs the streams placed on it with one model. name: the host's name in the fleet (events, the page)."""

    def __init__(self, config: AppConfig, name: str, spools: Path | None = None) -> None:
        self.name = name
        self.spools = HostSpools(spools or spool_folder(), name)  # before the model: orphans wait no longer
        self._news = threading.Event()  # an event was posted (wakes a drain's long poll)
        self._posting = threading.Lock()  # an event's order number and its place in the spool or outbox, together
        self._posted = itertools.count()  # the order events were made in, across the spool and the outbox
        self.config = config
        self.loaded = load_model(config.model, text_attention=register_attention())
        self.factory = stream_factory(config, self.loaded, share_between=config.max_streams)
        self.room = room_for(self.factory, config.max_streams)
        self.outbox: DropOldestQueue[dict[str, Any]] = DropOldestQueue(OUTBOX)
        self.bus = EventBus()
        self.bus.subscribe(self._post)
        self.publisher = start_publisher(config, {}, self.bus)  # the per-host outputs (the head's stay there)
        self.monitor = MemoryMonitor()
        self.assistant: Assistant | None = None
        self._starting = threading.Lock()  # the actor runs calls on several threads (a drain waits meanwhile)
        self._runtime_watches: tuple[WatchSpec, ...] = ()  # the head's runtime watches (set_runtime_watches)
        self._runtime_owners: dict[str, str] = {}  # who set each of them, by name
        self._watches_version = 0

    def describe(self) -> HostInfo:
        """Who and where this host is, and its room (streams that fit in all)."""
        node_id = ""
        try:
            import ray  # present whenever this runs as an actor

            node_id = ray.get_runtime_context().get_node_id()
        except (ImportError, RuntimeError):
            pass
        return HostInfo(
            host=self.name,
            node_id=node_id,
            hostname=socket.gethostname(),
            pid=os.getpid(),
            room=self.room,
            family=self.loaded.family,
            device=str(self.loaded.device),
        )

    def start_stream(self, stream: StreamConfig) -> str:
        """Starts watching `stream` here; returns the admission line. Refused as `Assistant.add_stream` says
        (ValueError, AdmissionError, SourceError), nothing kept."""
        with self._starting:
            return self._start_stream(stream)

    def _start_stream(self, stream: StreamConfig) -> str:
        capture = dataclasses.replace(stream.capture, max_size=self.loaded.adapter.frame_size())
        if self.assistant is None:
            admission = self.factory.admit(1)
            first = self.factory.build(stream.name, stream.schedule)
            self.assistant = self._assistant(first)
            self.assistant.start()
            if self._runtime_watches:
                self.assistant.set_runtime_watches(self._runtime_watches, owners=self._runtime_owners)
            self.assistant.watch(capture, stream=stream.name, allow_down=True)
            return admission
        return self.assistant.add_stream(stream.name, capture, allow_down=True, schedule=stream.schedule)

    def ask(self, question: str, stream: str | None = None, request: str | None = None) -> None:
        """Queues a person's question for one of this host's streams (None: all of them); its answer's events carry
        `request` (the API request's id)."""
        if self.assistant is None:
            raise ValueError(f"host {self.name} runs no stream")
        self.assistant.ask(question, stream, request=request)

    def set_runtime_watches(
        self, specs: Sequence[WatchSpec], reasons: dict[str, str], version: int, owners: dict[str, str] | None = None
    ) -> None:
        """The fleet's runtime watches (kept on the head), run on this host's streams that they watch, now and on
        streams started here later. A set older than one already taken (`version`: calls may arrive out of order)
        is ignored. reasons: why a watch went, for the end of its alert; owners: who set each (by name)."""
        with self._starting:
            if version <= self._watches_version:
                return
            self._watches_version, self._runtime_watches = version, tuple(specs)
            self._runtime_owners = dict(owners or {})
            if self.assistant is not None:
                self.assistant.set_runtime_watches(self._runtime_watches, reasons, self._runtime_owners)

    def remove_stream(self, name: str) -> None:
        """Stops and forgets one of this host's streams (its first too). Its last stream goes with the assistant:
        the next stream placed here starts a new one. ValueError for a stream it does not run."""
        if self.assistant is None or name not in self.assistant.streams:
            raise ValueError(f"host {self.name} runs no stream named {name!r}")
        if len(self.assistant.streams) > 1:
            self.assistant.remove_stream(name)
            return
        self.assistant.stop()
        self.assistant = None
        self.bus.publish(Status(stream=name, kind=StatusKind.STREAM_REMOVED, message="stream removed"))

    def streams(self) -> list[str]:
        return [] if self.assistant is None else list(self.assistant.streams)

    def drain(self, wait_s: float = 0.0, acked: dict[str, int] | None = None) -> tuple[list[dict[str, Any]], int]:
        """The events since the last drain as wire dicts (the spools' unsent alerts and answers, each with
        `_spool: [id, seq]`, an adopted orphan's first; then the outbox's, oldest first), and how many the outbox
        dropped so far. acked: spool id -> the seq up to which the head delivered the spooled events. With
        `wait_s`, waits that long for a first event when there is none (a long poll: an event reaches the head
        as soon as it is made, without a drain every few milliseconds).

        This host's own events come in the order they were made, spooled or not: an answer's last pieces
        (outbox) before the answer (spool), or an API client that ends its stream at the answer loses them."""
        self.spools.ack(acked or {})
        self.spools.scan()
        self._news.clear()
        if wait_s > 0 and not self.outbox.qsize() and not self.spools.has_unsent():
            self._news.wait(wait_s)
        spooled = self.spools.unsent()
        adopted = [wire for wire in spooled if wire.get("_replay")]
        own = [wire for wire in spooled if not wire.get("_replay")] + self.outbox.drain()
        return adopted + sorted(own, key=lambda wire: wire.get("_posted", -1)), self.outbox.dropped

    def finish(self, acked: dict[str, int]) -> None:
        """After the last drain of a stopped host: the head's acknowledgements applied, and the spools let go
        (a fully delivered one deleted; one with events left stays for a host to adopt)."""
        self.spools.ack(acked)
        self.spools.close(delivered=True)

    def stop(self, timeout: float = 10.0) -> bool:
        """Stops the assistant (its last events stay in the outbox for a final drain)."""
        stopped = True
        if self.assistant is not None:
            stopped = self.assistant.stop(timeout)
        if self.publisher is not None:
            self.bus.unsubscribe(self.publisher)
            self.publisher.close(timeout=5.0)
            self.publisher = None
        self.monitor.close()
        return stopped

    def _assistant(self, first) -> Assistant:
        # the head ends the run (--max-rounds over the whole fleet, every stream ended): a host never ends by itself
        limits = RunLimits(max_rounds=0, duration_s=self.config.limits.duration_s, end_with_stream=False)
        notes = None
        if self.config.timeline is not None and self.config.timeline_notes:
            from timeline.notes import TimelineNotes

            notes = TimelineNotes(self.config.timeline.path)
        return Assistant(
            [first],
            self.bus,
            limits,
            memory_sample=memory_fields(self.monitor),
            notes=notes,
            factory=self.factory,
            input_limits=self.config.input_limits,
            first_stays=False,  # the coordinator removes any stream of a host
        )

    def _post(self, event: Event) -> None:
        if event.stream is None and isinstance(event, (Status, WarningEvent, ErrorEvent)):
            event = _of_host(event, self.name)
        wire = to_wire(redacted(event))
        with self._posting:
            wire["_posted"] = next(self._posted)
            if isinstance(event, DURABLE):
                self.spools.append(wire)
            else:
                self.outbox.put(wire)
        self._news.set()


def _of_host(event: Status | WarningEvent | ErrorEvent, host: str) -> Event:
    """A host-wide event as the fleet tells it: `host NAME: ...`; a status keeps no kind of the whole run."""
    message = f"host {host}: {event.message}"
    if isinstance(event, Status):
        return dataclasses.replace(event, kind=StatusKind.INFO, message=message)
    return dataclasses.replace(event, message=message)
