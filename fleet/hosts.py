"""The host actors of the fleet, as the coordinator holds them: started one per `edge_host` unit of each node (node
affinity), joined once their model has loaded, given up when they fail to start; drained of events by the
coordinator without ever waiting on one, and found lost when Ray says the actor died. Every call to a host carries
the fleet's key (host_access.py), which only the head holds."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any

from app.config import AppConfig
from app.fleet_config import FleetConfig
from bus import ErrorEvent, Event, Status, StatusKind
from fleet.host_access import FleetAccess, without_timeline_password
from fleet.host_actor import HostActor
from fleet.nodes import NodeSlots, node_slots
from fleet.placement import HostRoom
from fleet.wire import HostInfo
from outputs.registry import per_host

NODES_EVERY_S = 2.0  # how often the node table is read for new boxes (and boxes whose host ended)
HOST_RETRY_S = 60.0  # a node whose host failed to start gets a new one after this long


@dataclass
class HostHandle:
    """One host actor. ready: its model is loaded (`info` filled in); streams: those running on it;
    starting: streams being started on it (start refs pending); key: the fleet's, for every call to it."""

    name: str
    node: NodeSlots
    actor: Any
    started_at: float
    key: str = field(default="", repr=False)
    info: HostInfo | None = None
    ready: bool = False
    streams: set[str] = field(default_factory=set)
    starting: set[str] = field(default_factory=set)
    drain_ref: Any = None
    describe_ref: Any = None

    def room(self) -> HostRoom:
        room = self.info.room if self.info is not None else 0
        return HostRoom(self.name, room, len(self.streams) + len(self.starting), self.node.names)


def start_host(
    ray: ModuleType, config: AppConfig, node: NodeSlots, unit: int, resource: str, access: FleetAccess
) -> HostHandle:
    """Starts a host actor on `node` (its model loads in the actor; `describe_ref`, its `join`, resolves once it
    has)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    name = node.host_name(unit)
    options: dict[str, Any] = {
        "name": f"host-{name}",
        "num_cpus": 0,  # the assistant's threads use what the box has; the unit of placement is `resource`
        "resources": {resource: 1},
        "scheduling_strategy": NodeAffinitySchedulingStrategy(node.node_id, soft=False),
        "max_restarts": 0,  # a stream's cache lives in one process: a lost host's streams move, rebuilt
        "get_if_exists": False,
        "max_concurrency": 4,  # a drain's long poll, a question, a stream starting, a stop: none waits on another
    }
    if node.gpus_per_host:
        options["num_gpus"] = node.gpus_per_host
    actor = ray.remote(HostActor).options(**options).remote(config, name, access.host)
    handle = HostHandle(name, node, actor, time.monotonic(), key=access.key)
    handle.describe_ref = actor.join.remote(access.key, access.timeline_password)
    return handle


def host_config(config: AppConfig) -> AppConfig:
    """What a host needs of the run's settings: the head-only outputs (outputs/registry.py: all of MQTT, webhooks
    and ntfy), the log and the page stay on the head; an output registered to run per host goes along. The
    timeline's password stays out too (a host gets it in its first call: host_access.py)."""
    config = replace(config, outputs=per_host(config.outputs), ui=None, log_jsonl=None, streams=[], fleet=None)
    return without_timeline_password(config)


class HostPool:
    """The fleet's hosts by name: a host started for every `edge_host` unit the nodes offer and no host fills (new
    boxes are seen within NODES_EVERY_S), joined once its model loaded (a `host_joined` status), given up when it
    fails to start or to load within host_start_s (an error event; its node is tried again after HOST_RETRY_S).
    config: the run's (the hosts get `host_config` of it); lock: the coordinator's, which readers on other threads
    hold; publish: the head's bus; forget: what the coordinator does with a host given up (its pending work).
    access: the fleet's key and what its hosts are created with (host_access.py), made here for this fleet."""

    def __init__(
        self,
        ray: ModuleType,
        config: AppConfig,
        fleet: FleetConfig,
        lock: threading.RLock,
        publish: Callable[[Event], None],
        forget: Callable[[HostHandle], None],
    ) -> None:
        self.ray, self.config, self.fleet = ray, host_config(config), fleet
        self.access = FleetAccess.new(config)
        self.lock, self.publish, self.forget = lock, publish, forget
        self.hosts: dict[str, HostHandle] = {}
        self._failed_nodes: dict[str, float] = {}  # node id -> when its host failed to start
        self._units: dict[str, int] = {}  # node id -> hosts started there so far (names stay unique)
        self._nodes_read_at = 0.0

    def ready(self) -> list[HostHandle]:
        return [h for h in self.hosts.values() if h.ready]

    def loading(self) -> bool:
        return any(not h.ready for h in self.hosts.values())

    def drop(self, host: HostHandle) -> None:
        with self.lock:
            self.hosts.pop(host.name, None)

    def read_nodes(self, force: bool = False) -> None:
        """Starts hosts on nodes that offer more than run there (new boxes; a box whose host failed, after a while)."""
        now = time.monotonic()
        if not force and now - self._nodes_read_at < NODES_EVERY_S:
            return
        self._nodes_read_at = now
        for node in node_slots(self.ray.nodes(), self.fleet.resource):
            failed_at = self._failed_nodes.get(node.node_id)
            if failed_at is not None and now - failed_at < HOST_RETRY_S:
                continue
            running = sum(1 for h in self.hosts.values() if h.node.node_id == node.node_id)
            for _ in range(node.hosts - running):
                unit = self._units.get(node.node_id, 0)
                self._units[node.node_id] = unit + 1
                host = start_host(self.ray, self.config, node, unit, self.fleet.resource, self.access)
                with self.lock:
                    self.hosts[host.name] = host

    def settle(self, wait_s: float) -> None:
        """Hosts that finished loading join (or failed: reported, the node retried later)."""
        pending = {h.describe_ref: h for h in self.hosts.values() if not h.ready and h.describe_ref is not None}
        if not pending:
            return
        done, _ = self.ray.wait(list(pending), num_returns=len(pending), timeout=wait_s)
        for ref in done:
            host = pending[ref]
            host.describe_ref = None
            try:
                host.info = self.ray.get(ref)
            except Exception as err:  # the model did not load there, or the actor could not start
                self._give_up(host, f"host {host.name} did not start: {remote_cause(err)}")
                continue
            host.ready = True
            info = host.info
            message = (
                f"host {host.name} joined: {info.family} on {info.device}, room for {info.room} "
                f"streams (node {host.node.node_id[:8]}, {info.hostname})"
            )
            self.publish(Status(kind=StatusKind.HOST_JOINED, message=message, host=host.name))
        for host in [h for h in pending.values() if not h.ready and h.name in self.hosts]:
            if time.monotonic() - host.started_at > self.fleet.host_start_s:
                self.ray.kill(host.actor)
                self._give_up(host, f"host {host.name} did not load within {self.fleet.host_start_s:g} s")

    def _give_up(self, host: HostHandle, message: str) -> None:
        self._failed_nodes[host.node.node_id] = time.monotonic()
        self.forget(host)
        self.publish(ErrorEvent(where="fleet", message=message))


def remote_cause(err: BaseException) -> str:
    """The message of what a host raised (Ray wraps it with the remote traceback)."""
    cause = getattr(err, "cause", None)
    if isinstance(cause, BaseException):
        return str(cause) or type(cause).__name__
    return str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__
