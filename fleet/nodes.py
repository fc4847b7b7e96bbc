"""Which boxes take hosts: Ray's node table read as slots (pure functions; no Ray call here).

A box offers hosts by the custom resource `edge_host` (`ray start --resources='{"edge_host": 1}'`; 2 on a box
with two GPUs, or 2 on one GPU to run two hosts on fractions of it). Each unit is one host actor, placed on that
node (node affinity) with the node's GPUs shared out evenly between its units. A pin (`node = "..."` in a
stream's table) names a node by its `edge_node` label (`ray start --labels edge_node=door`), its host name, its
address or the first 6+ characters of its Ray node id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.fleet_config import RESOURCE

LABEL = "edge_node"


@dataclass(frozen=True)
class NodeSlots:
    """An alive node that offers hosts. gpus_per_host: its GPUs shared out between its hosts (0 without GPUs)."""

    node_id: str
    address: str
    hostname: str
    label: str
    hosts: int
    gpus_per_host: float

    @property
    def names(self) -> frozenset[str]:
        return frozenset(n for n in (self.node_id, self.address, self.hostname, self.label) if n)

    def host_name(self, unit: int) -> str:
        """A host's name in the fleet: the node's label or host name, its id's first 6 characters, the unit."""
        return f"{self.label or self.hostname or self.address}-{self.node_id[:6]}-{unit}"


def node_slots(nodes: list[dict[str, Any]], resource: str = RESOURCE) -> list[NodeSlots]:
    """The alive nodes of `ray.nodes()` that offer `resource`, as slots (in the table's order)."""
    slots = []
    for node in nodes:
        resources = node.get("Resources") or {}
        units = int(resources.get(resource, 0))
        if not node.get("Alive") or units < 1:
            continue
        labels = node.get("Labels") or {}
        slots.append(
            NodeSlots(
                node_id=node["NodeID"],
                address=node.get("NodeManagerAddress", ""),
                hostname=node.get("NodeManagerHostname", ""),
                label=str(labels.get(LABEL, "")),
                hosts=units,
                gpus_per_host=float(resources.get("GPU", 0.0)) / units,
            )
        )
    return slots
