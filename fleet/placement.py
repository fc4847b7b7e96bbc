"""Where streams go: a pure function of the hosts' room and the streams' pins (no Ray, no threads).

A host's room is how many streams its admission arithmetic says fit next to the model (app/admission.py), capped
by --max-streams. Unpinned streams spread out: each goes to the host with the most room left (ties: the host
named first), so a lost host costs as few streams as it can. A pinned stream (`node = "..."` in its
[streams.NAME] table: a USB camera on the box it is plugged into) goes only to a host on that node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class HostRoom:
    """A host as placement sees it. names: what a pin may call its node (Ray node id, address, host name)."""

    host: str
    room: int  # streams that fit on it in all
    placed: int = 0  # streams it runs now
    names: frozenset[str] = frozenset()

    @property
    def free(self) -> int:
        return max(self.room - self.placed, 0)

    def is_on(self, node: str) -> bool:
        return node in self.names or any(len(node) >= 6 and name.startswith(node) for name in self.names)


@dataclass(frozen=True)
class Placement:
    """stream -> host for those placed now; stream -> why not, for the others."""

    hosts: dict[str, str] = field(default_factory=dict)
    waiting: dict[str, str] = field(default_factory=dict)


def place(streams: Sequence[str], pins: Mapping[str, str], hosts: Sequence[HostRoom]) -> Placement:
    """Places `streams` (in order; pinned ones first, as they have one choice) on `hosts`.

    pins: stream -> node (only those pinned). A stream that finds no room waits, with the reason.
    """
    free = {h.host: h.free for h in hosts}
    order = [s for s in streams if s in pins] + [s for s in streams if s not in pins]
    placed: dict[str, str] = {}
    waiting: dict[str, str] = {}
    for stream in order:
        node = pins.get(stream)
        candidates = [h for h in hosts if node is None or h.is_on(node)]
        if not candidates:
            waiting[stream] = f"no host runs on node {node!r} (pinned in its [streams.{stream}] table)"
            continue
        best = max(candidates, key=lambda h: free[h.host])  # max keeps the first of equals
        if free[best.host] < 1:
            where = f"on node {node!r}" if node is not None else "in the fleet"
            total = sum(h.room for h in candidates)
            waiting[stream] = f"no host {where} has room for one more stream ({total} fit in all, every one taken)"
            continue
        placed[stream] = best.host
        free[best.host] -= 1
    return Placement(placed, waiting)
