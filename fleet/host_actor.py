"""The host as the fleet's Ray actor: a `FleetHost` behind the checks of host_access.py. Every call carries the
fleet's key (the head's); a stream's source passes the host's own source policy; the timeline's password arrives
in the first call (`join`), not in the creation arguments Ray keeps. Nothing here returns a secret, and no caller
can run its own code in the actor (see `__ray_call__`). No Ray import at module level: tests may run it here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.config import AppConfig, StreamConfig
from fleet.host import FleetHost
from fleet.host_access import HostAccess, with_timeline_password
from fleet.wire import HostInfo
from watches.spec import WatchSpec


class GuardedHost:
    """A FleetHost (config: without the timeline's password; name: the host's) that only the fleet's head uses."""

    def __init__(self, config: AppConfig, name: str, access: HostAccess) -> None:
        self._name = name
        self._access = access
        self._host = FleetHost(config, name)

    def join(self, key: str, timeline_password: str | None) -> HostInfo:
        """Takes the timeline's password (kept only in the host's settings) and says who and where the host is."""
        self._access.check_key(key, self._name)
        self._host.config = with_timeline_password(self._host.config, timeline_password)
        return self._host.describe()

    def start_stream(self, key: str, stream: StreamConfig) -> str:
        """FleetHost.start_stream, once the source passed the host's policy (SourceRefused when not)."""
        self._access.check_key(key, self._name)
        self._access.check_source(stream)
        return self._host.start_stream(stream)

    def ask(self, key: str, question: str, stream: str | None = None, request: str | None = None) -> None:
        self._access.check_key(key, self._name)
        self._host.ask(question, stream, request)

    def set_runtime_watches(
        self, key: str, specs: Sequence[WatchSpec], reasons: dict[str, str], version: int, owners: dict[str, str]
    ) -> None:
        self._access.check_key(key, self._name)
        self._host.set_runtime_watches(specs, reasons, version, owners)

    def remove_stream(self, key: str, name: str) -> None:
        self._access.check_key(key, self._name)
        self._host.remove_stream(name)

    def streams(self, key: str) -> list[str]:
        self._access.check_key(key, self._name)
        return self._host.streams()

    def drain(
        self, key: str, wait_s: float = 0.0, acked: dict[str, int] | None = None
    ) -> tuple[list[dict[str, Any]], int]:
        self._access.check_key(key, self._name)
        return self._host.drain(wait_s, acked)

    def finish(self, key: str, acked: dict[str, int]) -> None:
        self._access.check_key(key, self._name)
        self._host.finish(acked)

    def stop(self, key: str, timeout: float = 10.0) -> bool:
        self._access.check_key(key, self._name)
        return self._host.stop(timeout)


class HostActor(GuardedHost):
    """What `ray.remote` is given. Ray subclasses an actor class to add these three methods unless it has
    `__ray_actor_class__` already (ray.actor._modify_class): its own `__ray_call__` runs any function a caller
    sends with the actor as its argument, which would read everything the host holds. Here it is refused."""

    __ray_actor_class__ = GuardedHost  # as Ray's own subclass names the class it wraps

    def __ray_ready__(self) -> bool:
        return True

    def __ray_call__(self, fn: object, *args: object, **kwargs: object) -> None:
        raise PermissionError(f"host {self._name}: refused: a fleet host runs no caller's code")

    def __ray_terminate__(self) -> None:
        import ray

        ray.actor.exit_actor()
