"""Connections and requests before the login, bounded: a flood of half-open connections or never-ending requests
must not take the process's file descriptors, which the assistant needs for its cameras, uploads and timeline.

- `raise_fd_limit`: the soft limit on open files goes up to the hard one (at most `wanted`) at start; systemd's
  default soft limit is 1,024.
- `bounded_protocol`: uvicorn's HTTP protocol, keeping at most `ConnectionLimits.allowed(...)` connections open (a
  reserve of files left for the rest of the process); one more is answered 503 and closed at once. A connection
  whose request head is not whole `request_timeout_s` after it began (or after the connection opened) is closed:
  uvicorn itself waits forever for a head.
- `AnonymousRequestLimit` (ASGI): with a login set, at most `max_anonymous_requests` requests without the login
  cookie are in flight (the login page, its files and the login itself: ui.login_gate refuses the rest), more
  get 503; their bodies must arrive within `request_timeout_s`.

Gradio's launch makes uvicorn's Config itself, so the protocol is installed on the running server right after it
listens (`install`): a connection accepted in that moment keeps uvicorn's plain protocol. The headless API
(app.serve_api) installs it before it listens, and bounds its bodies' time itself (api.body_limit).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import resource
import time
from dataclasses import dataclass

from ui.login_gate import logged_in, login_required

logger = logging.getLogger(__name__)

BUSY_BODY = b"the page is busy: too many connections; try again in a moment"
BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\nconnection: close\r\n"
    b"content-length: %d\r\n\r\n%s" % (len(BUSY_BODY), BUSY_BODY)
)


@dataclass(frozen=True)
class ConnectionLimits:
    """max_connections: open connections at once, all clients together; reserve_fds: open files kept for the rest
    of the process (cameras, uploads, the timeline, the model's files); request_timeout_s: seconds a request head
    (and, without the login, its body) may take to arrive; max_anonymous_requests: requests without the login in
    flight at once (with a login set)."""

    max_connections: int = 512
    reserve_fds: int = 256
    request_timeout_s: float = 10.0
    max_anonymous_requests: int = 32

    def __post_init__(self) -> None:
        if self.max_connections < 1 or self.max_anonymous_requests < 1 or self.reserve_fds < 0:
            raise ValueError("ConnectionLimits needs max_connections >= 1, max_anonymous_requests >= 1, reserve >= 0")
        if not self.request_timeout_s > 0:
            raise ValueError(f"request_timeout_s must be > 0 seconds, got {self.request_timeout_s}")

    def allowed(self, soft_limit: int, in_use: int) -> int:
        """Connections allowed when the process may open `soft_limit` files and has `in_use` open: at most
        max_connections, and never into the reserve (but at least 1: the page stays reachable)."""
        return max(1, min(self.max_connections, soft_limit - in_use - self.reserve_fds))


def raise_fd_limit(wanted: int = 65536) -> int:
    """Raises the soft RLIMIT_NOFILE to min(hard, `wanted`) when it is lower (never lowers it); returns the soft
    limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(hard, wanted)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as err:
            logger.warning("cannot raise the open files limit from %d to %d: %s", soft, target, err)
            return soft
        return target
    return soft


def open_files() -> int:
    """Files this process has open now (Linux: /proc/self/fd; elsewhere 0)."""
    with contextlib.suppress(OSError):
        return len(os.listdir("/proc/self/fd"))
    return 0


def bounded_protocol(base: type, limit: int, request_timeout_s: float) -> type:
    """A subclass of uvicorn's HTTP protocol class `base` (h11 or httptools) that keeps at most `limit`
    connections open and closes a connection whose request head takes longer than `request_timeout_s`."""
    check_every = request_timeout_s / 2

    class BoundedProtocol(base):
        _refused = False
        _head_since: float | None = None
        _timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport) -> None:
            if len(self.connections) >= limit:
                self._refused = True
                transport.write(BUSY)
                transport.close()
                return
            super().connection_made(transport)
            self._head_since = time.monotonic()
            self._timer = self.loop.call_later(check_every, self._check)

        def connection_lost(self, exc) -> None:
            if self._refused:
                return
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._head_since is None and not self._serving():
                self._head_since = time.monotonic()  # a new request begins on a kept-alive connection
            super().data_received(data)
            if self._serving():
                self._head_since = None

        def _serving(self) -> bool:
            cycle = self.cycle
            return cycle is not None and not cycle.response_complete

        def _check(self) -> None:
            self._timer = None
            if self.transport.is_closing() or self.transport.get_protocol() is not self:
                return  # closed, or handed over (a websocket)
            if self._serving():
                self._head_since = None
            elif self._head_since is not None and time.monotonic() - self._head_since >= request_timeout_s:
                self.transport.close()
                return
            self._timer = self.loop.call_later(check_every, self._check)

    BoundedProtocol.__name__ = f"Bounded{base.__name__}"
    return BoundedProtocol


def install(server: object, limits: ConnectionLimits) -> int:
    """Installs the bounded protocol on Gradio's running uvicorn `server` (its `config`); returns the connection
    limit in force (from the soft limit on open files and the files open now)."""
    config = server.config
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    soft = 2**20 if soft == resource.RLIM_INFINITY else soft
    limit = limits.allowed(soft, open_files())
    base = config.http_protocol_class
    config.http_protocol_class = bounded_protocol(base, limit, limits.request_timeout_s)
    return limit


async def _refuse_busy(send) -> None:
    body = json.dumps({"error": "too many requests without a login in flight; try again in a moment"}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class AnonymousRequestLimit:
    """ASGI middleware inside the Gradio app: `AnonymousRequestLimit(app, limits=ConnectionLimits(...))`.
    `exempt_prefixes`: paths that authenticate themselves (the HTTP API's bearer tokens, its own bounds on
    clients): not counted here, so its long-lived event feeds never take the login page's places."""

    def __init__(self, app, limits: ConnectionLimits, exempt_prefixes: tuple[str, ...] = ()) -> None:
        self.app = app
        self.limits = limits
        self.exempt_prefixes = exempt_prefixes
        self.in_flight = 0

    async def __call__(self, scope, receive, send) -> None:
        app = scope.get("app")
        if (
            scope["type"] != "http"
            or app is None
            or not login_required(app)
            or (self.exempt_prefixes and scope["path"].startswith(self.exempt_prefixes))
            or logged_in(app, scope["headers"])
        ):
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.limits.max_anonymous_requests:
            await _refuse_busy(send)
            return
        self.in_flight += 1
        deadline = time.monotonic() + self.limits.request_timeout_s
        body_done = False

        async def receive_in_time():
            """The body within the deadline (else a disconnect); after it, as sent (a slow download of the
            page's scripts is not cut)."""
            nonlocal body_done
            if body_done:
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), timeout=max(deadline - time.monotonic(), 0.001))
            except TimeoutError:
                return {"type": "http.disconnect"}
            body_done = message["type"] != "http.request" or not message.get("more_body", False)
            return message

        try:
            await self.app(scope, receive_in_time, send)
        finally:
            self.in_flight -= 1
