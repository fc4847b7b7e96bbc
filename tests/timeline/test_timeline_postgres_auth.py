"""The PostgreSQL timeline never hands its password to a server that asks for it in clear (issue 39).

A fake server on 127.0.0.1 speaks just enough of the startup protocol: it answers an SSLRequest with 'N' (no
TLS), then asks for a cleartext password (AuthenticationCleartextPassword) and records whatever comes back.
With libpq's defaults (`sslmode=prefer`, no `require_auth`) the password arrived in clear."""

from __future__ import annotations

import logging
import socket
import struct
import threading

import pytest

from timeline.config import TimelineError
from timeline.pg_schema import connect
from timeline.postgres_target import PostgresTarget

PASSWORD = "SECRETPW-timeline"
SSL_REQUEST = 80877103


class CleartextAskingServer:
    """Accepts connections on 127.0.0.1, refuses TLS, asks for a cleartext password; `received`: every byte
    the clients sent after the request, `ssl_requests`: how many asked for TLS."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.received = b""
        self.ssl_requests = 0
        self.startups = 0
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> CleartextAskingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.sock.close()
        self._thread.join(5)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    self._talk(conn)
                except OSError:
                    pass

    @staticmethod
    def _message(conn: socket.socket) -> bytes:
        head = b""
        while len(head) < 4:
            chunk = conn.recv(4 - len(head))
            if not chunk:
                return b""
            head += chunk
        length = struct.unpack("!I", head)[0]
        body = b""
        while len(body) < length - 4:
            chunk = conn.recv(length - 4 - len(body))
            if not chunk:
                break
            body += chunk
        return body

    def _talk(self, conn: socket.socket) -> None:
        body = self._message(conn)
        if len(body) == 4 and struct.unpack("!I", body)[0] == SSL_REQUEST:
            self.ssl_requests += 1
            conn.sendall(b"N")
            body = self._message(conn)
        if not body:
            return
        self.startups += 1
        conn.sendall(b"R" + struct.pack("!II", 8, 3))  # AuthenticationCleartextPassword
        while chunk := conn.recv(4096):
            self.received += chunk


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_loopback_server_asking_for_a_cleartext_password_gets_nothing(host: str) -> None:
    with CleartextAskingServer() as server:
        target = PostgresTarget(host, "timeline", server.port, "assistant", PASSWORD)
        with pytest.raises(TimelineError) as err:
            connect(target)
    assert server.startups >= 1
    assert PASSWORD.encode() not in server.received and server.received[:1] != b"p"
    assert PASSWORD not in str(err.value)


def test_a_server_beyond_loopback_must_show_a_verified_certificate() -> None:
    """The same fake server as `db.example` (libpq's hostaddr points the name at 127.0.0.1): refused at the
    SSLRequest already, nothing else sent."""
    psycopg = pytest.importorskip("psycopg")
    with CleartextAskingServer() as server:
        target = PostgresTarget("db.example", "timeline", server.port, "assistant", PASSWORD)
        kwargs = target.connect_kwargs(psycopg.pq.version())
        assert kwargs["sslmode"] == "verify-full"
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(**kwargs, hostaddr="127.0.0.1")
    assert server.ssl_requests >= 1 and server.startups == 0 and server.received == b""


def test_beyond_loopback_scram_is_required_and_weaker_tls_is_loud(caplog) -> None:
    target = PostgresTarget("db.example", "timeline", 5432, "assistant", PASSWORD)
    assert target.connect_kwargs(180000)["require_auth"] == "scram-sha-256"
    assert PostgresTarget("127.0.0.1", "t", 5432, "a", PASSWORD).connect_kwargs(180000)["require_auth"] == (
        "!password,!md5"
    )
    with caplog.at_level(logging.WARNING):
        weak = PostgresTarget.from_url("postgresql://assistant@db.example/timeline?sslmode=require", env={})
        assert weak.connect_kwargs(180000)["sslmode"] == "require"
    assert any("sslmode=require" in r.getMessage() and "verify" in r.getMessage() for r in caplog.records)


def test_an_old_libpq_gets_verified_tls_instead_of_require_auth() -> None:
    """libpq before 16 has no require_auth: beyond loopback only a verified server (verify-full) gets the
    password; a weaker sslmode is refused there with what to do."""
    kwargs = PostgresTarget("db.example", "timeline", 5432, "assistant", PASSWORD).connect_kwargs(150000)
    assert kwargs["sslmode"] == "verify-full" and "require_auth" not in kwargs
    weak = PostgresTarget("db.example", "timeline", 5432, "assistant", PASSWORD, sslmode="require")
    with pytest.raises(ValueError, match="libpq 16"):
        weak.connect_kwargs(150000)
