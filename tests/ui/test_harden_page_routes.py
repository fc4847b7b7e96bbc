"""Nothing answers before the login but the login page itself: every route of the served app (enumerated from the
app, path parameters filled in) and the Gradio routes that used to answer anonymously get 401 without the login
cookie, before any of their own checks; the login page and its static files still load, and with the cookie the
routes answer. A live server on 127.0.0.1."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.support.harden_page_helpers import LOGIN, PASSWORD, served

# what the login form needs before anyone has logged in (ui.login_gate.PUBLIC_PATHS)
PUBLIC = {("GET", "/"), ("POST", "/login"), ("POST", "/login/"), ("GET", "/favicon.ico"), ("GET", "/theme.css")}
PUBLIC_PREFIXES = ("/assets/", "/static/", "/svelte/")
NAMED_IN_THE_ISSUE = [
    ("GET", "/gradio_api/heartbeat/abc"),
    ("POST", "/gradio_api/cancel"),
    ("POST", "/gradio_api/stream/abc"),
    ("GET", "/gradio_api/stream/abc/0/1/playlist.m3u8"),
    ("POST", "/gradio_api/reset"),
    ("GET", "/gradio_api/startup-events"),
    ("GET", "/gradio_api/token"),
    ("GET", "/gradio_api/user"),
    ("GET", "/gradio_api/app_id"),
    ("GET", "/openapi.json"),
    ("GET", "/manifest.json"),
    ("GET", "/logout"),
    ("GET", "/no/such/route"),
]


def routes(items, prefix: str = ""):
    """(method, path) of every route under `items` (Starlette mounts and FastAPI's included routers walked)."""
    for route in items:
        if hasattr(route, "original_router"):  # fastapi's included router
            yield from routes(route.original_router.routes, prefix + route.include_context.prefix)
        elif getattr(route, "methods", None):
            yield from ((method, prefix + route.path) for method in route.methods if method != "HEAD")
        elif hasattr(route, "routes"):  # a mount
            yield from routes(route.routes, prefix + route.path)
        elif hasattr(route, "path"):  # a websocket route
            yield "GET", prefix + route.path


def concrete(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "x1", path)


def public(method: str, path: str) -> bool:
    return (method, path) in PUBLIC or (method == "GET" and path.startswith(PUBLIC_PREFIXES))


def answer(client: httpx.Client, base: str, method: str, path: str) -> int | str:
    try:
        with client.stream(method, base + path, timeout=5) as response:
            return response.status_code
    except httpx.ReadTimeout:
        return "no answer in 5 s"


def test_no_route_answers_before_the_login():
    with served() as (base, page), httpx.Client() as anonymous:
        found = sorted(set(routes(page.server_app.routes)))
        assert len(found) > 40 and ("GET", "/gradio_api/heartbeat/{session_hash}") in found
        checked = [(method, concrete(path)) for method, path in found if not public(method, path)]
        answered = {
            (method, path): code
            for method, path in checked + NAMED_IN_THE_ISSUE
            if (code := answer(anonymous, base, method, path)) != 401
        }
        assert answered == {}


def test_the_login_page_loads_and_the_cookie_opens_the_routes():
    with served() as (base, _), httpx.Client() as person:
        assert person.get(f"{base}/").status_code == 200
        assert person.get(f"{base}/theme.css").status_code == 200
        assert person.get(f"{base}/config").status_code == 401
        sent = {"username": LOGIN.user, "password": PASSWORD}
        assert person.post(f"{base}/login", data=sent).status_code == 200
        for path in ("/config", "/gradio_api/app_id", "/gradio_api/startup-events", "/manifest.json"):
            assert person.get(base + path).status_code == 200, path


@pytest.mark.parametrize("cookie", ["access-token=forged", "access-token-unsecure-x=forged; access-token=", ""])
def test_a_forged_cookie_is_no_login(cookie):
    with served() as (base, _), httpx.Client() as anonymous:
        headers = {"Cookie": cookie} if cookie else {}
        assert anonymous.get(f"{base}/gradio_api/app_id", headers=headers).status_code == 401


def test_without_a_login_the_routes_answer_as_before():
    with served(login=None) as (base, _), httpx.Client() as anyone:
        assert anyone.get(f"{base}/gradio_api/app_id").status_code == 200
        assert anyone.get(f"{base}/config").status_code == 200
