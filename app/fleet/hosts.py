"""The host actors of the fleet, as the coordinator holds them: started one per `edge_host` unit of each node (node
affinity), drained of events without ever waiting on one, and found lost when Ray says the actor died."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from app.config import AppConfig
from app.fleet.host import FleetHost
from app.fleet.nodes import NodeSlots
from app.fleet.placement import HostRoom


@dataclass
class HostHandle:
    """One host actor. ready: its model is loaded (`info` filled in); streams: those running on it;
    starting: streams being started on it (start refs pending)."""

    name: str
    node: NodeSlots
    actor: Any
    started_at: float
    info: dict[str, Any] = field(default_factory=dict)
    ready: bool = False
    streams: set[str] = field(default_factory=set)
    starting: set[str] = field(default_factory=set)
    drain_ref: Any = None
    describe_ref: Any = None

    def room(self) -> HostRoom:
        return HostRoom(
            self.name, int(self.info.get("room", 0)), len(self.streams) + len(self.starting), self.node.names
        )


def start_host(ray: ModuleType, config: AppConfig, node: NodeSlots, unit: int, resource: str) -> HostHandle:
    """Starts a host actor on `node` (its model loads in the actor; `describe_ref` resolves once it has)."""
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
    actor = ray.remote(FleetHost).options(**options).remote(config, name)
    handle = HostHandle(name, node, actor, time.monotonic())
    handle.describe_ref = actor.describe.remote()
    return handle


def host_config(config: AppConfig) -> AppConfig:
    """What a host needs of the run's settings: outputs, the log and the page stay on the head."""
    from dataclasses import replace

    return replace(config, mqtt=None, webhooks=[], ntfy=[], ui=None, log_jsonl=None, streams=[], fleet=None)
