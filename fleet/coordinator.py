"""The coordinator on the head: places every stream on a host with room, routes questions to the stream's host,
brings every host's events onto the head's bus, and places a lost host's streams again on the others.

One loop thread does all of it: it waits (at most `poll_s`) for drains to come back (each a long poll on its host,
so an event reaches the head as soon as it is made) and issues the next; it settles the
hosts that finished loading, the streams that started (or were refused); it looks for new boxes every few
seconds; and it places the streams that wait. Nothing in the loop waits on a host: a busy or dying host costs
the others nothing. A host is lost when Ray says its actor died (its process, or its machine: Ray's health checks
decide how fast); its streams then wait, their open alerts end once (reason: host lost), and they are placed
again (their caches are rebuilt from the live feed; the timeline keeps the past). A host's alerts and answers are
spooled on its box before they are drained (fleet/spool.py): the head publishes each once with a receipt
(fleet/delivery.py, bus/receipt.py) and acknowledges it with a later drain, once every output that took it is
done with it; what a lost host (or a dead head) had not seen acknowledged is delivered again by the host that
adopts its spool (docs/fleet.md, "Nothing lost").

Questions come from other threads (the terminal, the page): `ask` routes under a lock and waits at most
ASK_TIMEOUT_S for the host to take the question.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from app.config import AppConfig, StreamConfig
from app.fleet_config import FleetConfig
from bus import Alert, ErrorEvent, Event, EventBus, EventsDropped, Status, StatusKind
from bus.redact import redacted
from capture import CaptureConfig
from fleet.cluster import FleetError
from fleet.delivery import Delivery
from fleet.hosts import HostHandle, HostPool, remote_cause
from fleet.placement import place
from fleet.tracking import FleetTracking
from fleet.wire import from_wire
from watches.spec import WatchSpec

logger = logging.getLogger(__name__)

ASK_TIMEOUT_S = 10.0
DRAIN_WAIT_S = 0.5  # how long a host holds a drain open for its next event (the long poll)
SETTLE_S = 10.0  # at a stop: how long the outputs may take to finish the last spooled events before the final acks


class Coordinator:
    """The fleet's head. bus: the head's bus (terminal, page, log, MQTT, timeline subscribe to it)."""

    def __init__(
        self, config: AppConfig, fleet: FleetConfig, bus: EventBus, ray: ModuleType, delivery: Delivery | None = None
    ) -> None:
        self.config, self.fleet, self.bus, self.ray = config, fleet, bus, ray
        self.streams: dict[str, StreamConfig] = {s.name: s for s in config.streams}
        self._lock = threading.RLock()
        self.pool = HostPool(ray, config, fleet, self._lock, self._publish, self._forget)
        self.owner: dict[str, str] = {}  # stream -> host running it
        self.waiting: dict[str, tuple[str, float]] = {}  # stream -> (why, since when)
        self.tracking = FleetTracking()
        self.delivery = delivery or Delivery()  # the head's passes the outputs' delivery marks
        self._dropped: dict[str, int] = {}  # host -> events its outbox dropped, as last reported
        self.done = threading.Event()  # the run ended (--max-rounds, every stream ended)
        self._late: set[str] = set()  # streams past the failover deadline (reported once)
        self._retry_at: dict[str, float] = {}
        self._starts: dict[Any, tuple[str, str]] = {}  # start ref -> (stream, host)
        self.runtime_watches: tuple[WatchSpec, ...] = ()  # set while running (the API), every host runs them
        self.runtime_owners: dict[str, str] = {}  # who set each of them, by name
        self._watches_version = 0  # increases with each change, so a host never goes back to an older set
        self._stop = threading.Event()
        self._loop = threading.Thread(target=self._run, name="fleet-coordinator", daemon=True)

    # -- start and stop (the head's main thread) ----------------------------------------------------------

    def start(self) -> None:
        """Starts a host on every box that offers one, waits until they have loaded the model (at most
        host_start_s), places the configured streams and starts the loop. FleetError when no box offers a host,
        no host loaded, or the streams cannot all be placed (with the arithmetic)."""
        self.pool.read_nodes(force=True)
        if not self.hosts:
            raise FleetError(
                f"no node of the cluster offers the resource {self.fleet.resource!r}: start each box with "
                f"`ray start --address HEAD:PORT --resources='{{\"{self.fleet.resource}\": 1}}'`"
            )
        deadline = time.monotonic() + self.fleet.host_start_s
        while self.pool.loading() and time.monotonic() < deadline:
            self.pool.settle(wait_s=0.5)
        ready = [h for h in self.hosts.values() if h.ready]
        if not ready:
            raise FleetError(f"no host loaded the model within {self.fleet.host_start_s:g} s (see the error events)")
        plan = place(list(self.streams), self._pins(), [h.room() for h in ready])
        if plan.waiting:
            rooms = ", ".join(f"{h.name}: {h.room().room}" for h in ready)
            reasons = "; ".join(f"{s}: {why}" for s, why in plan.waiting.items())
            raise FleetError(
                f"the cluster has no room for {len(plan.waiting)} of the {len(self.streams)} streams ({reasons}); "
                f"streams each host fits: {rooms}. Add boxes, raise --max-streams, or lower --budget"
            )
        now = time.monotonic()
        self.waiting = {s: ("not placed yet", now) for s in self.streams}
        for stream, host in plan.hosts.items():
            self._start_on(stream, self.hosts[host])
        while self._starts and time.monotonic() < deadline:
            self._settle_starts(wait_s=0.5)
        self._publish(Status(kind=StatusKind.READY, message=f"fleet ready: {self.describe()}"))
        self._loop.start()

    def stop(self, timeout: float = 15.0, settle_s: float = SETTLE_S) -> None:
        """Stops the loop, then every host (their last events are published); waits up to `settle_s` for the
        outputs to finish with the spooled events, acknowledges what they finished (a host keeps the rest in its
        spool for the next run) and says the fleet stopped."""
        self._stop.set()
        if self._loop.is_alive():
            self._loop.join(timeout)
        with self._lock:
            hosts = list(self.hosts.values())
        stops = {h.name: h.actor.stop.remote(h.key) for h in hosts}
        stopped = []
        for host in hosts:
            try:
                self.ray.get(stops[host.name], timeout=timeout)
                items, _ = self.ray.get(
                    host.actor.drain.remote(host.key, 0.0, self.delivery.acks_for(host.name)), timeout=timeout
                )
                self._publish_items(host, items)
                stopped.append(host)
            except Exception as err:  # a host lost or stuck at the end: the rest still stop
                logger.warning("host %s did not stop cleanly: %s", host.name, remote_cause(err))
        if left := self.delivery.settle(settle_s):
            logger.warning("%d spooled events not yet delivered at the stop: their hosts' spools keep them", left)
        for host in stopped:
            try:
                self.ray.get(host.actor.finish.remote(host.key, self.delivery.acks_for(host.name)), timeout=timeout)
            except Exception as err:
                logger.warning("host %s did not stop cleanly: %s", host.name, remote_cause(err))
        for host in hosts:
            self.ray.kill(host.actor)
        self._publish(Status(kind=StatusKind.STOPPED, message="fleet stopped"))

    # -- people (any thread) ------------------------------------------------------------------------------

    def ask(self, question: str, stream: str | None = None, request: str | None = None) -> list[str]:
        """Routes a person's question to the host of `stream` (None: every running stream). Returns the streams
        asked: for None, those running on a host now (a stream waiting to be placed, or still starting, is not
        asked). request: the API request's id, which the answer's events carry. ValueError when it is empty or too
        long, names no stream, or its stream has no host now (with None: when no stream runs); AssistantBusy from
        the host."""
        text = self.config.input_limits.check(question)
        with self._lock:
            if stream is not None and stream not in self.streams:
                raise ValueError(f"no stream named {stream!r}; streams: {', '.join(self.streams)}")
            if stream is not None and stream not in self.owner:
                why = self.waiting.get(stream, ("not placed yet", 0.0))[0]
                raise ValueError(f"stream {stream!r} has no host now ({why}); ask again once it runs")
            if stream is None:
                targets = [(h, None) for h in self.hosts.values() if h.ready and h.streams]
            else:
                targets = [(self.hosts[self.owner[stream]], stream)]
            if not targets:
                raise ValueError("no stream runs on a host now; ask again once one does")
            asked = sorted(name for host, _ in targets for name in host.streams) if stream is None else [stream]
            extra = () if request is None else (request,)  # the page and the terminal ask without one
            refs = [host.actor.ask.remote(host.key, text, name, *extra) for host, name in targets]
        self._wait_hosts(refs, "the question")
        return asked

    def set_runtime_watches(
        self,
        specs: Sequence[WatchSpec],
        reasons: dict[str, str] | None = None,
        owners: dict[str, str] | None = None,
    ) -> None:
        """The watches set while running (held on the head: fleet/api_assistant.py), sent to every ready host,
        which runs those of its streams (a host still loading, or a stream placed later, gets them with a stream's
        start). reasons: why a watch went (by name), for the end of its alert; owners: who set each (by name).
        ValueError when a host refuses them (busy) or does not take them in time; a lost host is left out (its
        streams get them where they go next)."""
        with self._lock:
            self.runtime_watches, self.runtime_owners = tuple(specs), dict(owners or {})
            self._watches_version += 1
            call = (self.runtime_watches, dict(reasons or {}), self._watches_version, self.runtime_owners)
            refs = [h.actor.set_runtime_watches.remote(h.key, *call) for h in self.hosts.values() if h.ready]
        self._wait_hosts(refs, "the watches", lost_ok=True)

    def _wait_hosts(self, refs: list, what: str, lost_ok: bool = False) -> None:
        """Waits (at most ASK_TIMEOUT_S each) for hosts to take `what`; ValueError saying why one did not."""
        for ref in refs:
            try:
                self.ray.get(ref, timeout=ASK_TIMEOUT_S)
            except self.ray.exceptions.RayActorError as err:
                if not lost_ok:
                    why = remote_cause(err)
                    raise ValueError(f"the stream's host was lost ({why}); ask again once it runs") from err
            except self.ray.exceptions.GetTimeoutError as err:
                raise ValueError(f"the stream's host did not take {what} in time; ask again") from err
            except self.ray.exceptions.RayTaskError as err:  # the host refused it (busy, or the stream just left it)
                raise ValueError(remote_cause(err)) from err

    def add_stream(self, stream: StreamConfig) -> None:
        """Adds a stream to the fleet: it is placed on a host with room by the loop (a status says where)."""
        with self._lock:
            if stream.name in self.streams:
                raise ValueError(f"a stream named {stream.name!r} exists already: every stream needs its own name")
            self.streams[stream.name] = stream
            self.waiting[stream.name] = ("not placed yet", time.monotonic())

    def add_source(self, name: str, capture_config: CaptureConfig) -> None:
        """A stream added at run time (the page, the API, the terminal): `capture_config` with the run's standing
        question, placed as `add_stream` says."""
        self.add_stream(StreamConfig(name, capture_config, self.config.schedule))

    def remove_stream(self, name: str) -> None:
        with self._lock:
            if name not in self.streams:
                raise ValueError(f"no stream named {name!r}; streams: {', '.join(self.streams)}")
            del self.streams[name]
            self.waiting.pop(name, None)
            host = self.hosts.get(self.owner.pop(name, ""))
            if host is not None:
                host.streams.discard(name)
                host.actor.remove_stream.remote(host.key, name)

    def describe(self) -> str:
        """`stream -> host` for every stream, and the waiting ones with why."""
        with self._lock:
            placed = [f"{s} on {h}" for s, h in sorted(self.owner.items())]
            waiting = [f"{s} waiting ({why})" for s, (why, _) in sorted(self.waiting.items())]
        return "; ".join(placed + waiting) or "no streams"

    # -- the loop -----------------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._tick()
            except Exception as err:  # the loop must outlive a surprise: it is reported and goes on
                logger.exception("the fleet's loop failed")
                self._publish(ErrorEvent(where="fleet", message=f"the coordinator's loop failed: {err}"))

    def _tick(self) -> None:
        self._drain_hosts()
        self.pool.settle(wait_s=0)
        self._settle_starts(wait_s=0)
        self.pool.read_nodes()
        self._place_waiting()
        self._check_deadlines()
        self._check_end()

    def _drain_hosts(self) -> None:
        """Waits (at most poll_s) for the first host's drain to come back, publishes what every returned drain
        brought and issues their next (a long poll of DRAIN_WAIT_S on the host: events arrive as they are made)."""
        hosts = [h for h in self.hosts.values() if h.ready]
        for host in hosts:
            if host.drain_ref is None:
                host.drain_ref = self._next_drain(host)
        pending = {h.drain_ref: h for h in hosts}
        if not pending:
            self._stop.wait(self.fleet.poll_s)
            return
        done, _ = self.ray.wait(list(pending), num_returns=1, timeout=self.fleet.poll_s)
        if done:
            done, _ = self.ray.wait(list(pending), num_returns=len(pending), timeout=0)
        for ref in done:
            host = pending[ref]
            host.drain_ref = None
            try:
                items, dropped = self.ray.get(ref)
            except self.ray.exceptions.RayActorError as err:
                self._lost(host, remote_cause(err))
                continue
            self._publish_items(host, items)
            self._report_dropped(host, dropped)
            host.drain_ref = self._next_drain(host)

    def _next_drain(self, host: HostHandle) -> Any:
        """A drain of `host` that acknowledges what was delivered of its spools."""
        return host.actor.drain.remote(host.key, DRAIN_WAIT_S, self.delivery.acks_for(host.name))

    def _report_dropped(self, host: HostHandle, dropped: int) -> None:
        """An `events_dropped` event when the host's outbox dropped events since its last drain."""
        new = dropped - self._dropped.get(host.name, 0)
        if new > 0:
            self._dropped[host.name] = dropped
            logger.warning("host %s dropped %d events (%d so far)", host.name, new, dropped)
            self.bus.publish(EventsDropped(host=host.name, dropped=dropped, new=new))

    def _publish_items(self, host: HostHandle, items: list[dict]) -> None:
        begun: list[Alert] = []  # alerts a lost host began, replayed: no watch will end them
        for item in items:
            if not self.delivery.fresh(host.name, item):
                continue  # a spooled event delivered before (its host died before the acknowledgement)
            try:
                event = from_wire(item)
            except ValueError as err:
                logger.warning("host %s sent an event that is not one: %s", host.name, err)
                self.delivery.delivered(item)  # given up on
                continue
            if isinstance(event, Alert) and self.delivery.replayed(host.name, item):
                if not event.began and not self.tracking.is_open(event.stream, event.id):
                    self.delivery.delivered(item)  # the head ended it already, when its host was lost
                    continue
                if event.began:
                    begun.append(event)
            self.tracking.saw(event)
            self.delivery.publish(self.bus, item, event)
        for begin in begun:  # a replay arrives whole (one drain): what it left on ends now, once
            end = self.tracking.end_alert(begin.stream or "", begin.id)
            if end is not None:
                self._publish(end)

    def _settle_starts(self, wait_s: float) -> None:
        if not self._starts:
            return
        done, _ = self.ray.wait(list(self._starts), num_returns=len(self._starts), timeout=wait_s)
        for ref in done:
            stream, name = self._starts.pop(ref)
            with self._lock:
                host = self.hosts.get(name)
                if host is not None:
                    host.starting.discard(stream)
                try:
                    admission = self.ray.get(ref)
                except self.ray.exceptions.RayActorError:
                    continue  # the host is gone: found by its drain, and the stream still waits
                except Exception as err:  # refused there (admission, source): tried again later
                    self._retry_at[stream] = time.monotonic() + self.fleet.retry_s
                    self._publish(ErrorEvent(stream=stream, where="fleet", message=f"{name}: {remote_cause(err)}"))
                    continue
                if stream not in self.streams or host is None:  # removed meanwhile
                    if host is not None:
                        host.actor.remove_stream.remote(host.key, stream)
                    continue
                self.waiting.pop(stream, None)
                self._late.discard(stream)
                self.owner[stream] = name
                host.streams.add(stream)
                self.tracking.restarted(stream)
            self._publish(
                Status(
                    stream=stream,
                    kind=StatusKind.STREAM_PLACED,
                    message=f"runs on host {name}; memory: {admission}",
                    host=name,
                )
            )

    def _place_waiting(self) -> None:
        now = time.monotonic()
        with self._lock:
            starting = {s for s, _ in self._starts.values()}
            ready = [h for h in self.hosts.values() if h.ready]
            streams = [
                s for s in self.waiting if s not in starting and self._retry_at.get(s, 0.0) <= now and s in self.streams
            ]
            if not streams or not ready:
                return
            plan = place(streams, self._pins(), [h.room() for h in ready])
            for stream, host in plan.hosts.items():
                self._start_on(stream, self.hosts[host])
            for stream, why in plan.waiting.items():
                since = self.waiting[stream][1]
                if self.waiting[stream][0] != why:
                    self.waiting[stream] = (why, since)
                    self._publish(Status(stream=stream, kind=StatusKind.STREAM_WAITING, message=f"waiting: {why}"))

    def _start_on(self, stream: str, host: HostHandle) -> None:
        host.starting.add(stream)
        if self._watches_version:  # the runtime watches first (the host keeps only the newest it was sent)
            call = (self.runtime_watches, {}, self._watches_version, self.runtime_owners)
            host.actor.set_runtime_watches.remote(host.key, *call)
        self._starts[host.actor.start_stream.remote(host.key, self.streams[stream])] = (stream, host.name)

    def _lost(self, host: HostHandle, why: str) -> None:
        """The host is gone: its streams wait to be placed again, their open alerts end (once, reason: host lost)."""
        now = time.monotonic()
        with self._lock:
            self._forget(host)
            self._dropped.pop(host.name, None)
            self.delivery.lost(host.name)
            moved = sorted(host.streams | host.starting)
            for stream in moved:
                self.owner.pop(stream, None)
                if stream in self.streams:
                    self.waiting[stream] = (f"its host {host.name} was lost", now)
        self._publish(
            Status(
                kind=StatusKind.HOST_LOST,
                message=f"host {host.name} lost ({why}); moving: {', '.join(moved) or '-'}",
                host=host.name,
            )
        )
        for stream in moved:
            for end in self.tracking.end_alerts(stream):
                self._publish(end)
            self._publish(
                Status(stream=stream, kind=StatusKind.STREAM_WAITING, message=f"waiting: its host {host.name} was lost")
            )

    @property
    def hosts(self) -> dict[str, HostHandle]:
        return self.pool.hosts

    def _forget(self, host: HostHandle) -> None:
        with self._lock:  # `ask` reads the hosts from other threads
            self.pool.drop(host)
            for ref, (_, name) in list(self._starts.items()):
                if name == host.name:
                    del self._starts[ref]

    def _check_deadlines(self) -> None:
        now = time.monotonic()
        for stream, (why, since) in list(self.waiting.items()):
            if stream not in self._late and now - since > self.fleet.failover_s:
                self._late.add(stream)
                message = f"no host for {self.fleet.failover_s:g} s ({why}); it keeps waiting for room"
                self._publish(ErrorEvent(stream=stream, where="fleet", message=message))

    def _check_end(self) -> None:
        limits = self.config.limits
        if self.done.is_set():
            return
        reason = None
        if limits.max_rounds and self.tracking.rounds >= limits.max_rounds:
            reason = f"reached --max-rounds {limits.max_rounds}"
        elif limits.end_with_stream and self.streams and set(self.streams) <= self.tracking.finished:
            reason = "every stream ended"
        if reason is not None:
            self._publish(Status(kind=StatusKind.RUN_FINISHED, message=f"run finished: {reason}"))
            self.done.set()

    def _pins(self) -> dict[str, str]:
        return {name: s.node for name, s in self.streams.items() if s.node}

    def _publish(self, event: Event) -> None:
        self.tracking.saw(event)
        self.bus.publish(redacted(event))
