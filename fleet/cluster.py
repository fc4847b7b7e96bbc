"""Joining the Ray cluster named by --ray: `auto` (the cluster this machine belongs to, `ray start` done) or
HOST:PORT of its head. A clear FleetError (exit 2) when there is none: Ray itself would retry a wrong address
for minutes, so the head's port is tried first. The head's driver joins with Ray's token authentication
(ray_token.py): without a private token on this box it does not try."""

from __future__ import annotations

import socket
import sys
from types import ModuleType

from app.fleet_config import split_address
from fleet.ray_token import TokenError, use_token

NAMESPACE = "edge-assistant"
CONNECT_TIMEOUT_S = 5.0


class FleetError(Exception):
    """The fleet cannot start: no cluster at the address, no box that offers hosts, no room for the streams."""


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """FleetError when nothing accepts connections at the head's address."""
    host, port = split_address(address)
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as err:
        raise FleetError(
            f"no Ray head answers at {address} ({err.strerror or err}): start one there with `ray start --head "
            f"--port {port}`, or give its address"
        ) from err


WORKER_SETUP = "edge_assistant.ready"


def worker_setup() -> dict[str, str] | None:
    """The runtime environment of this driver's Ray workers. Installed (the rooms inside `edge_assistant`, which
    this process imported to run), each worker first runs `edge_assistant.ready`, so that it imports the rooms by
    their names as the driver does; in the repository (`python -m app`) the workers find them on the driver's path
    and need nothing."""
    package = sys.modules.get("edge_assistant")
    if package is None or package.ROOT != package.HERE:
        return None
    return {"worker_process_setup_hook": WORKER_SETUP}


def connect(address: str) -> ModuleType:
    """Joins the cluster (this process becomes its driver) with Ray's token authentication and returns the `ray`
    module."""
    try:
        use_token()  # before Ray reads the environment
    except TokenError as err:
        raise FleetError(f"cannot join the Ray cluster: {err}") from err
    if address != "auto":
        check_reachable(address)
    import ray

    try:
        ray.init(
            address=address,
            namespace=NAMESPACE,
            log_to_driver=False,
            logging_level="WARNING",
            runtime_env=worker_setup(),
        )
    except (ConnectionError, RuntimeError, ValueError) as err:
        hint = " (no cluster runs on this machine: `ray start --head` first)" if address == "auto" else ""
        raise FleetError(f"cannot join the Ray cluster at {address}: {err}{hint}") from err
    return ray
