"""Who may use a host actor, what it may open, and how its secrets reach it.

Any driver that joined the Ray cluster can find a host actor by name and call it. So the head makes a key for
its fleet and keeps it: a host refuses every call that does not carry it (compared in constant time). A host
opens a source the operator configured at start as given; any other (added from the page or the terminal) must
pass the same source policy the head applied (capture.policy), and carries no login. Ray keeps an actor's
creation arguments in its control store, so those hold only digests (of the key, of the configured sources,
which may carry a login) and the settings without the timeline's password: the password comes in the host's
first call, with the key."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass, field, replace

from app.config import AppConfig, StreamConfig
from capture.policy import SourcePolicy, SourceRefused
from timeline.postgres_target import PostgresTarget


def digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def source_id(stream: StreamConfig) -> bytes:
    """A stream's source as a digest: how a host knows the configured sources without their text."""
    return digest(str(stream.capture.source))


@dataclass(frozen=True)
class HostAccess:
    """What a host is created with. key_digest: the fleet key's digest; configured: `source_id` of each stream
    configured at start (the operator's sources, under any name); policy: what any other source must pass."""

    key_digest: bytes
    configured: frozenset[bytes]
    policy: SourcePolicy

    def check_key(self, key: object, host: str) -> None:
        """PermissionError unless `key` is the fleet's."""
        if not isinstance(key, str) or not hmac.compare_digest(digest(key), self.key_digest):
            raise PermissionError(f"host {host}: refused: the call does not carry the key of the fleet that started it")

    def check_source(self, stream: StreamConfig) -> None:
        """SourceRefused for a source the policy refuses, unless the operator configured it at start."""
        if source_id(stream) in self.configured:
            return
        if stream.capture.credentials is not None:
            raise SourceRefused(f"stream {stream.name!r}: a source chosen while running gets no login")
        self.policy.check(stream.capture.source)


@dataclass(frozen=True)
class FleetAccess:
    """The head's side: its key, what its hosts are created with, and the password they get in their first call."""

    key: str = field(repr=False)
    host: HostAccess
    timeline_password: str | None = field(default=None, repr=False)

    @classmethod
    def new(cls, config: AppConfig) -> FleetAccess:
        """A fresh key for the fleet of `config` (its configured streams, its source policy, its timeline)."""
        key = secrets.token_urlsafe(32)
        configured = frozenset(source_id(s) for s in config.streams)
        target = config.timeline.path if config.timeline is not None else None
        password = target.password if isinstance(target, PostgresTarget) else None
        return cls(key, HostAccess(digest(key), configured, config.source_policy()), password)


def without_timeline_password(config: AppConfig) -> AppConfig:
    """`config` with no password in its timeline's target (a host gets it in its first call)."""
    target = config.timeline.path if config.timeline is not None else None
    if not isinstance(target, PostgresTarget) or target.password is None:
        return config
    return replace(config, timeline=replace(config.timeline, path=replace(target, password=None)))


def with_timeline_password(config: AppConfig, password: str | None) -> AppConfig:
    """`config` with its timeline's password back (nothing to do without a PostgreSQL timeline or a password)."""
    target = config.timeline.path if config.timeline is not None else None
    if not isinstance(target, PostgresTarget) or password is None:
        return config
    return replace(config, timeline=replace(config.timeline, path=replace(target, password=password)))
