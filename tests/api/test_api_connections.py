"""The API has the page's connection bounds (ui.connection_limit) alone (`--api`) and behind a page login: a flood
of silent connections is kept to `max_connections` (more are answered 503 and closed at once) and closed after the
request timeout, without a traceback, while a client with a token still gets its answer; a request body to /api/
or /v1/ not whole within the request timeout gets 408 and its connection is closed (behind a page login too, where
the page's bound on anonymous requests leaves the API's paths alone). Live servers on 127.0.0.1 with low limits
and a bounded number of real sockets, every one closed by the test."""

from __future__ import annotations

import contextlib
import socket
import time

import httpx
import pytest

from api.asking import Asks
from api.auth import Access, parse_tokens
from api.config import ApiConfig
from api.context import ApiContext
from api.feed import EventFeed
from api.server import RunningApi, api_routes
from app.config import UIConfig
from app.serve_api import serve_headless, stop_server
from tests.api.test_api_requests import ADMIN, HEADERS, Cameras, Timeline
from tests.support.harden_page_helpers import PASSWORD, free_port, login, served
from tests.ui.test_harden_page_connections import closed_by_server, flood, server_side_sockets, settles_within_limit
from ui.connection_limit import ConnectionLimits

LIMITS = ConnectionLimits(max_connections=24, request_timeout_s=1.0, max_anonymous_requests=4, reserve_fds=64)
FLOOD = 200
SLOW_BODIES = {
    "/api/v1/ask": b'{"question": "what is th',
    "/v1/chat/completions": b'{"model": "door", "messages": [{"role": "us',
}


def running_api() -> RunningApi:
    cameras = Cameras()
    tokens = parse_tokens(f"{ADMIN} read,ask,manage admin", "test")
    feed = EventFeed(replay=10, queue=10, max_clients=2)
    context = ApiContext(cameras, None, feed, Asks(cameras), Access(tokens), None, Timeline(), ApiConfig())
    return RunningApi(context, api_routes(context))


@contextlib.contextmanager
def headless():
    """(base URL, port) of the API alone, served by the app's own serve_headless with LIMITS."""
    server = thread = None
    try:
        server, thread = serve_headless(running_api(), UIConfig(port=free_port()), limits=LIMITS)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}", port
    finally:
        stop_server(server, thread)


def slow_body(path: str) -> bytes:
    """A POST to `path` with the token whose body stops short of its Content-Length."""
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {ADMIN}\r\n"
    head += "Content-Type: application/json\r\nContent-Length: 400\r\n\r\n"
    return head.encode() + SLOW_BODIES[path]


def answered_408_and_closed(sock: socket.socket, within_s: float) -> bool:
    sock.settimeout(within_s)
    answer = b""
    with contextlib.suppress(TimeoutError, ConnectionResetError):
        while chunk := sock.recv(4096):
            answer += chunk
        return answer.startswith(b"HTTP/1.1 408")  # and closed: recv gave b""
    return False


def test_a_flood_of_silent_connections_to_the_api_alone_is_bounded_and_a_client_still_gets_its_answer(capfd):
    with headless() as (base, port), flood(port, FLOOD, b"") as sockets:
        # before the request timeout would close them all anyway: the bound, not the timeout, closed these
        settled = settles_within_limit(port, LIMITS.request_timeout_s * 0.8, LIMITS.max_connections)
        assert settled, server_side_sockets(port)
        refused = sum(closed_by_server(sock, 0.05) for sock in sockets)
        assert refused >= FLOOD - LIMITS.max_connections  # beyond the limit: answered 503 and closed at once
        deadline = time.monotonic() + LIMITS.request_timeout_s + 1.5
        assert all(closed_by_server(sock, max(0.1, deadline - time.monotonic())) for sock in sockets)
        assert server_side_sockets(port) == 0
        reply = httpx.get(f"{base}/v1/models", headers=HEADERS, timeout=10)
        assert reply.status_code == 200
        assert {"door", "yard"} <= {model["id"] for model in reply.json()["data"]}
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.parametrize("path", sorted(SLOW_BODIES))
def test_a_slow_body_to_the_api_alone_gets_408_and_is_closed(path, capfd):
    with headless() as (base, port), flood(port, 4, slow_body(path)) as sockets:
        assert all(answered_408_and_closed(sock, LIMITS.request_timeout_s + 2) for sock in sockets)
        assert server_side_sockets(port) == 0
        assert httpx.get(f"{base}/v1/models", headers=HEADERS, timeout=10).status_code == 200
    assert "Traceback" not in capfd.readouterr().err  # the route saw a disconnect; what it sent then was dropped


@pytest.mark.parametrize("path", sorted(SLOW_BODIES))
def test_behind_a_page_login_slow_api_bodies_get_408_and_the_page_still_answers(path, capfd):
    with served(limits=LIMITS, api=running_api()) as (base, page):
        port = page.server_port
        with flood(port, LIMITS.max_connections, slow_body(path)) as sockets:  # all the page's connections
            assert all(answered_408_and_closed(sock, LIMITS.request_timeout_s + 2) for sock in sockets)
            assert server_side_sockets(port) == 0
            with httpx.Client() as person:
                assert login(person, base, PASSWORD) == 200
                assert person.get(f"{base}/config").status_code == 200
            assert httpx.get(f"{base}/v1/models", headers=HEADERS, timeout=10).status_code == 200
    assert "Traceback" not in capfd.readouterr().err
