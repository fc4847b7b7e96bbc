"""The fleet's settings (--ray and its neighbours)."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.fleet.cluster import split_address
from app.fleet.nodes import RESOURCE


@dataclass(frozen=True)
class FleetConfig:
    """address: `auto` or HOST:PORT of the Ray head. resource: the custom resource a box offers hosts by.
    host_start_s: how long a host may take to load the model before it counts as failed (seconds).
    failover_s: the deadline for a lost host's streams to run again elsewhere; a stream still without a host
    then is reported (an error event) and keeps waiting for room. poll_s: how often hosts are drained of events.
    retry_s: how long a stream a host refused waits before it is placed again."""

    address: str
    resource: str = RESOURCE
    host_start_s: float = field(
        default=600.0,
        metadata={
            "flag": "--ray-host-start-s",
            "help": "seconds a host may take to load the model before it counts as failed",
        },
    )
    failover_s: float = field(
        default=60.0,
        metadata={
            "flag": "--ray-failover-s",
            "help": "seconds a lost host's streams may take to run again elsewhere before it is reported as an error",
        },
    )
    poll_s: float = 0.2
    retry_s: float = 5.0

    def __post_init__(self) -> None:
        if self.address != "auto":
            split_address(self.address)
        for name in ("host_start_s", "failover_s", "poll_s", "retry_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"fleet setting {name} must be > 0 seconds, got {getattr(self, name)}")
