"""The page's gate, in front of Gradio (an ASGI middleware): requests by a foreign `Host` name (DNS rebinding)
or from a foreign `Origin` (a web page posting to the assistant) are refused before Gradio sees them, failed
logins are throttled per client address (ui.login_throttle), and with a login set nothing but the login page
answers a request without the login cookie (ui.login_gate).

Gradio's own checks stay behind it: the login cookie on every API route when a login is set.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from ui.login_gate import LOGIN_PATHS, refused_before_login
from ui.login_throttle import LoginThrottle

logger = logging.getLogger(__name__)


def _host_name(host: str) -> str:
    """The name part of a Host header or netloc ("[::1]:7860" -> "::1", "Box.lan.:80" -> "box.lan")."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host[1:]
    if host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host.rstrip(".")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class HostRule:
    """Which names the page answers to. Loopback names, IP addresses (a browser on an address is on that
    address's own origin: DNS rebinding needs a name), the bind address and the names allowed by the operator
    (--allowed-host, the share link's host once known). `allow` may add names while the page runs."""

    def __init__(self, bind_host: str, allowed: Iterable[str] = ()) -> None:
        self._names = {"localhost", _host_name(bind_host), *(_host_name(name) for name in allowed)}

    def allow(self, name: str) -> None:
        self._names.add(_host_name(name))

    def accepts(self, host: str | None) -> bool:
        """Whether a request with this `Host` header may reach the page (None: no header, refused)."""
        if not host:
            return False
        name = _host_name(host)
        return name in self._names or name.endswith(".localhost") or _is_ip(name)

    def same_origin(self, origin: str, host: str) -> bool:
        """Whether a request from `origin` (its Origin header) comes from the page itself (same host and port as
        the Host header) or from a name allowed by the operator (a reverse proxy's name)."""
        try:
            netloc = urlsplit(origin).netloc.lower()
        except ValueError:
            return False
        if not netloc:
            return False  # "null": a sandboxed frame or a file
        if netloc == host.strip().lower():
            return True
        name = _host_name(netloc)
        return name in self._names and not _is_ip(name) and name != "localhost"


def _header(scope: dict, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


async def _refuse(send, status: int, message: str, body_of: dict | None = None) -> None:
    body = json.dumps(body_of or {"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class PageGuard:
    """ASGI middleware: `PageGuard(app, rule=HostRule(...), throttle=LoginThrottle(...))` (Starlette builds it
    from `Middleware(PageGuard, rule=..., throttle=...)`). `bearer_prefixes`: paths whose routes check a bearer
    token themselves (the HTTP API): Host and Origin are checked for them too, the page's login cookie is not.
    `refusal_body(path, status, message)`: the body of a refusal on `path` where it is not the guard's own
    `{"error": message}` (None: that one; the API's /v1/ paths answer OpenAI's error object)."""

    def __init__(
        self,
        app,
        rule: HostRule,
        throttle: LoginThrottle,
        bearer_prefixes: tuple[str, ...] = (),
        refusal_body: Callable[[str, int, str], dict | None] | None = None,
    ) -> None:
        self.app = app
        self.rule = rule
        self.throttle = throttle
        self.bearer_prefixes = bearer_prefixes
        self.refusal_body = refusal_body

    async def _refuse(self, scope, send, status: int, message: str) -> None:
        body = self.refusal_body(scope["path"], status, message) if self.refusal_body else None
        await _refuse(send, status, message, body)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = _header(scope, b"host")
        if not self.rule.accepts(host):
            logger.warning("refused a request for Host %r (add it with --allowed-host if it is yours)", host)
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            await self._refuse(scope, send, 421, "this page does not answer to that host name; see --allowed-host")
            return
        origin = _header(scope, b"origin")
        if origin is not None and not self.rule.same_origin(origin, host or ""):
            logger.warning("refused a request from origin %r", origin)
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            await self._refuse(scope, send, 403, "requests from other sites are refused")
            return
        if scope["type"] == "http" and scope["method"] == "POST" and scope["path"] in LOGIN_PATHS:
            await self._login(scope, receive, send)
            return
        if not (self.bearer_prefixes and scope["path"].startswith(self.bearer_prefixes)) and refused_before_login(
            scope
        ):
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
                return
            await _refuse(send, 401, "log in first")
            return
        await self.app(scope, receive, send)

    async def _login(self, scope, receive, send) -> None:
        client = (scope.get("client") or ("unknown", 0))[0]
        wait_s = self.throttle.locked_for(client)
        if wait_s > 0:
            await _refuse(send, 429, f"too many failed logins; try again in {wait_s:.0f} s")
            return

        async def watch(message) -> None:
            # The outcome is counted before the client sees it: a client that has its answer has its count (it
            # cannot slip a next guess in before its failure is recorded).
            if message["type"] == "http.response.start":
                if message["status"] == 200:
                    self.throttle.succeeded(client)
                elif 400 <= message["status"] < 500:
                    self.throttle.failed(client)
            await send(message)

        await self.app(scope, receive, watch)


def drop_gradio_cors(app) -> bool:
    """Removes Gradio's CORS middleware from its app (returns whether it was there). Gradio adds it outside every
    middleware of ours and answers a preflight from any other localhost port itself, credentials allowed, before
    the guard sees it: a page of another local program could then call the assistant with the browser's login
    cookie. Without it the guard decides (another origin: 403), and the page's own requests need no CORS. Called
    right after launch: Starlette builds its middleware stack at the first request and again once it is reset."""
    kept = [m for m in app.user_middleware if getattr(m.cls, "__name__", "") != "CustomCORSMiddleware"]
    dropped = len(kept) != len(app.user_middleware)
    app.user_middleware = kept
    app.middleware_stack = None  # rebuilt from the list above at the next request
    return dropped
