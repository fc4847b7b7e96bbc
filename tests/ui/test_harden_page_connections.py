"""Connections before the login are bounded, so a flood of half-open connections or never-ending requests cannot
take the process's file descriptors (which the assistant needs for its cameras and the timeline): at most
`max_connections` are kept open at once (more are answered 503 and closed at once), a connection that sends no
whole request head within `request_timeout_s` is closed, requests without the login are limited in flight, and
the soft limit on open files is raised where the hard one allows. Live servers on 127.0.0.1 with low limits and a
bounded number of real sockets; a login still works after the flood."""

from __future__ import annotations

import contextlib
import resource
import socket
import time

import httpx
import psutil
import pytest

from tests.support.harden_page_helpers import PASSWORD, login, served
from ui.connection_limit import ConnectionLimits, raise_fd_limit

LIMITS = ConnectionLimits(max_connections=24, request_timeout_s=1.0, max_anonymous_requests=4, reserve_fds=64)
FLOOD = 60


def server_side_sockets(port: int) -> int:
    """This process's sockets accepted on `port` (the server runs in the test's process)."""
    return sum(
        1
        for c in psutil.Process().net_connections(kind="tcp")
        if c.laddr and c.laddr.port == port and c.status != psutil.CONN_LISTEN and c.raddr
    )


def settles_within_limit(port: int, within_s: float = 5.0, limit: int = LIMITS.max_connections) -> bool:
    """Whether the server's accepted sockets on `port` come down to `limit` within `within_s` (polled:
    on a loaded machine, another pytest-xdist worker beside it, the server in this process closes the ones beyond
    the limit a little later; without the bound they stay open: heartbeats never end, and half-open requests only
    after the request timeout)."""
    deadline = time.monotonic() + within_s
    while server_side_sockets(port) > limit:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def closed_by_server(sock: socket.socket, within_s: float) -> bool:
    """Whether the server closed `sock` (after an answer or none) within `within_s` seconds."""
    sock.settimeout(0.1)
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if sock.recv(4096) == b"":
                return True
        except TimeoutError:
            continue
        except ConnectionResetError:
            return True
    return False


@contextlib.contextmanager
def flood(port: int, count: int, head: bytes):
    """`count` connections to 127.0.0.1:`port`, each sending `head` (a request never finished) and then nothing."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sockets.append(sock)
            if head:
                with contextlib.suppress(OSError):
                    sock.sendall(head)
        yield sockets
    finally:
        for sock in sockets:
            sock.close()


@pytest.mark.parametrize("head", [b"", b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"], ids=["silent", "half-open"])
def test_half_open_connections_are_bounded_and_closed_and_a_login_still_works(head):
    with served(limits=LIMITS) as (base, page):
        port = page.server_port
        with flood(port, FLOOD, head) as sockets:
            # before the request timeout would close them all anyway: the bound, not the timeout, closed these
            assert settles_within_limit(port, LIMITS.request_timeout_s * 0.8), server_side_sockets(port)
            refused = sum(closed_by_server(sock, 0.05) for sock in sockets)
            assert refused >= FLOOD - LIMITS.max_connections  # the ones beyond the limit: closed at once
            # no whole request head in time: all closed within the request timeout and a second's slack (polled)
            deadline = time.monotonic() + LIMITS.request_timeout_s + 1.5
            assert all(closed_by_server(sock, max(0.1, deadline - time.monotonic())) for sock in sockets)
            assert server_side_sockets(port) == 0
            with httpx.Client() as person:  # the flood's sockets are still open on this side
                assert login(person, base, PASSWORD) == 200
                assert person.get(f"{base}/config").status_code == 200


def test_never_ending_requests_without_a_login_are_bounded():
    """Heartbeats on a page without a login: each is an endless event stream, each holds a connection."""
    head = b"GET /gradio_api/heartbeat/s%d HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with served(login=None, limits=LIMITS) as (base, page):
        port = page.server_port
        sockets = []
        try:
            for n in range(FLOOD):
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
                sockets.append(sock)
                with contextlib.suppress(OSError):
                    sock.sendall(head % n)
            assert settles_within_limit(port), server_side_sockets(port)
        finally:
            for sock in sockets:
                sock.close()
        time.sleep(0.5)
        assert httpx.get(f"{base}/config", timeout=10).status_code == 200


def test_slow_logins_in_flight_are_bounded():
    """Logins whose body never arrives: requests in flight without the login, beyond the limit answered 503."""
    head = b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\n"
    head += b"Content-Length: 1000\r\n\r\nusername=ann&pass"
    with served(limits=LIMITS) as (base, page), flood(page.server_port, 10, head) as sockets:
        answers = []
        for sock in sockets:
            sock.settimeout(2)
            try:
                answers.append(sock.recv(200))
            except TimeoutError:
                answers.append(b"")
        busy = [a for a in answers if a.startswith(b"HTTP/1.1 503")]
        assert len(busy) == 10 - LIMITS.max_anonymous_requests, answers


def test_the_soft_open_files_limit_is_raised_where_the_hard_one_allows():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lowered = min(1024, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowered, hard))
    try:
        assert raise_fd_limit(wanted=4096) == min(4096, hard)
        assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == min(4096, hard)
        assert raise_fd_limit(wanted=100) == min(4096, hard)  # never lowered
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_connection_limit_keeps_a_reserve_of_files():
    assert LIMITS.allowed(soft_limit=20_000, in_use=100) == LIMITS.max_connections
    assert LIMITS.allowed(soft_limit=1024, in_use=950) == 1024 - 950 - LIMITS.reserve_fds
    assert LIMITS.allowed(soft_limit=1024, in_use=1000) == 1  # never 0: the page stays reachable
    with pytest.raises(ValueError, match="max_connections"):
        ConnectionLimits(max_connections=0)
