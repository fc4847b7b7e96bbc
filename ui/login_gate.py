"""Nothing answers before the login but the login page: with a login set, a request without a valid login cookie
gets 401 unless it fetches the login page itself (`/`, its scripts, styles and icon) or posts the login. Gradio
checks the cookie only on the routes that carry the page's data; its other routes (the heartbeat, cancel,
streams, reset, startup events, token, user, app id, the OpenAPI schema) answered anyone.

The cookie is Gradio's own (set by its /login): `access-token-<cookie id>` or `access-token-unsecure-<cookie id>`,
valid while its value is one of the app's tokens. A Gradio without those attributes counts as nobody logged in
(closed, not open).
"""

from __future__ import annotations

from starlette.requests import cookie_parser

LOGIN_PATHS = ("/login", "/login/")
STARTUP_PATH = "/gradio_api/startup-events"  # Gradio's launch calls it once, anonymously, to start the queue
PUBLIC_GET_PATHS = frozenset({"/", "/favicon.ico", "/theme.css"})
PUBLIC_GET_PREFIXES = ("/assets/", "/static/", "/svelte/")  # the page's built scripts, styles and fonts


def login_required(app: object) -> bool:
    """Whether the Gradio app behind the gate asks for a login."""
    return getattr(app, "auth", None) is not None or getattr(app, "auth_dependency", None) is not None


def may_pass_without_login(method: str, path: str) -> bool:
    """The login page and what it loads, and the login itself."""
    if method == "POST":
        return path in LOGIN_PATHS
    return method in ("GET", "HEAD") and (path in PUBLIC_GET_PATHS or path.startswith(PUBLIC_GET_PREFIXES))


def logged_in(app: object, headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether the request's cookies hold a login token the app issued."""
    cookie_id, tokens = getattr(app, "cookie_id", None), getattr(app, "tokens", None)
    if cookie_id is None or not isinstance(tokens, dict):
        return False
    for key, value in headers:
        if key != b"cookie":
            continue
        cookies = cookie_parser(value.decode("latin-1"))
        for name in (f"access-token-{cookie_id}", f"access-token-unsecure-{cookie_id}"):
            token = cookies.get(name)
            if token and tokens.get(token) is not None:
                return True
    return False


def refused_before_login(scope: dict) -> bool:
    """Whether this request (an ASGI http or websocket scope, inside the Gradio app: `scope["app"]` is it) must
    get 401: a login is set, the request holds none, and it is not for the login page."""
    app = scope.get("app")
    if app is None or not login_required(app):
        return False
    method = scope.get("method", "GET") if scope["type"] == "http" else "WEBSOCKET"
    if may_pass_without_login(method, scope["path"]):
        return False
    if scope["path"] == STARTUP_PATH and getattr(app, "startup_events_triggered", True) is False:
        return False  # launch's own call, before launch returns; afterwards it needs the login like the rest
    return not logged_in(app, scope.get("headers", []))
