"""The fleet's settings (--ray and its neighbours), in the config layer: `app.config` builds them and the fleet
(fleet/) reads them, so nothing here imports the fleet."""

from __future__ import annotations

from dataclasses import dataclass, field

RESOURCE = "edge_host"  # the custom Ray resource a box offers hosts by (fleet/nodes.py)


def split_address(address: str) -> tuple[str, int]:
    """HOST:PORT as a pair; ValueError naming the expected form."""
    host, sep, port = address.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"--ray takes auto or HOST:PORT of the Ray head (e.g. 192.168.1.10:6379), got {address!r}")
    return host.strip("[]"), int(port)


@dataclass(frozen=True)
class FleetConfig:
    """address: `auto` or HOST:PORT of the Ray head. resource: the custom resource a box offers hosts by.
    host_start_s: how long a host may take to load the model before it counts as failed (seconds).
    failover_s: the deadline for a lost host's streams to run again elsewhere; a stream still without a host
    then is reported (an error event) and keeps waiting for room. poll_s: how often hosts are drained of events.
    retry_s: how long a stream a host refused waits before it is placed again.

    A field with `metadata={"help": ...}` is a command-line flag and a --config key (app/config_flags.py);
    `--ray` absent (None) is a run without a fleet."""

    address: str = field(
        metadata={
            "flag": "--ray",
            "metavar": "ADDRESS",
            "help": "run the streams on the hosts of a Ray cluster: auto (the cluster this machine joined with ray "
            "start) or HOST:PORT of its head; each box offers hosts by the resource edge_host. Without it Ray is "
            "not used",
        }
    )
    resource: str = RESOURCE
    host_start_s: float = field(
        default=600.0,
        metadata={
            "flag": "--ray-host-start-s",
            "help": "seconds a host may take to load the model before it counts as failed",
            "unit": "seconds",
        },
    )
    failover_s: float = field(
        default=60.0,
        metadata={
            "flag": "--ray-failover-s",
            "help": "seconds a lost host's streams may take to run again elsewhere before it is reported as an error",
            "unit": "seconds",
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
