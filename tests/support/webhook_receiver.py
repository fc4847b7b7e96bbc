"""A real HTTP receiver for the webhook tests, on 127.0.0.1: records every POST. It can also answer like a
hostile receiver (an endless body, a trickle, a redirect, garbage): see the `Answer` functions below."""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import repeat
from pathlib import Path
from typing import BinaryIO

import pytest

WAIT_S = 10.0


class Receiver:
    """An HTTP server on 127.0.0.1 that records every POST and answers with `statuses` in turn (then 200).
    While `gate` is given and not set, each request waits on it (a slow receiver). The first requests are
    answered by `answers` in turn instead (hostile answers, each writing the raw bytes it wants). `tls`
    (certificate, key) makes it an https:// receiver."""

    def __init__(
        self,
        statuses: tuple[int, ...] = (),
        gate: threading.Event | None = None,
        answers: Sequence[Answer] = (),
        tls: tuple[Path, Path] | None = None,
    ) -> None:
        self.statuses = list(statuses)
        self.gate = gate
        self.answers = list(answers)
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.entered = threading.Event()
        self.stop = threading.Event()  # set at close: hostile answers end
        self.hung_up = threading.Event()  # a hostile answer could not write on: the client closed the connection
        self.cond = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name; a followed redirect arrives as a GET)
                with receiver.cond:
                    receiver.requests.append((dict(self.headers), b""))
                    receiver.cond.notify_all()
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.entered.set()
                if receiver.gate is not None:
                    receiver.gate.wait(WAIT_S * 3)
                with receiver.cond:
                    receiver.requests.append((dict(self.headers), body))
                    answer = receiver.answers.pop(0) if receiver.answers else None
                    status = receiver.statuses.pop(0) if receiver.statuses and answer is None else 200
                    receiver.cond.notify_all()
                if answer is not None:
                    self.close_connection = True
                    answer(self.wfile, receiver)
                    return
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        scheme = "http"
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_port}/hook/token-in-path"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05})

    def wait_for(self, n: int) -> list[tuple[dict[str, str], bytes]]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.requests) >= n, WAIT_S), f"{len(self.requests)} of {n}"
            return list(self.requests)

    def close(self) -> None:
        self.stop.set()
        if self.gate is not None:
            self.gate.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


Answer = Callable[[BinaryIO, Receiver], None]


def _write_until_hung_up(out: BinaryIO, receiver: Receiver, pieces: Iterator[bytes], period_s: float = 0.0) -> None:
    """Writes `pieces` (endless) until the client hangs up (sets `hung_up`) or the receiver closes."""
    for piece in pieces:
        if receiver.stop.is_set():
            return
        try:
            out.write(piece)
        except OSError:
            receiver.hung_up.set()
            return
        if period_s:
            time.sleep(period_s)


def endless_body(out: BinaryIO, receiver: Receiver) -> None:
    """200 with a chunked body that never ends (64 KiB chunks as fast as the client takes them)."""
    out.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    _write_until_hung_up(out, receiver, repeat(b"10000\r\n" + b"x" * 0x10000 + b"\r\n"))


def endless_status_line(out: BinaryIO, receiver: Receiver) -> None:
    """A status line that never ends."""
    out.write(b"HTTP/1.1 200 O")
    _write_until_hung_up(out, receiver, repeat(b"K" * 4096))


def trickle(period_s: float) -> Answer:
    """An answer written one byte every `period_s` seconds, forever (its status line first)."""

    def answer(out: BinaryIO, receiver: Receiver) -> None:
        text = b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 10**6
        _write_until_hung_up(out, receiver, (text[i : i + 1] for i in range(len(text))), period_s)

    return answer


def redirect(location: str, status: int = 302) -> Answer:
    """A redirect to `location`."""

    def answer(out: BinaryIO, receiver: Receiver) -> None:
        out.write(f"HTTP/1.1 {status} Found\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n".encode())

    return answer


def garbage(out: BinaryIO, receiver: Receiver) -> None:
    """A line that is not HTTP."""
    out.write(b"HELLO THERE\r\n\r\n")


@pytest.fixture
def receivers() -> Iterator[list[Receiver]]:
    """Receivers made by `start(receivers, ...)`; all are closed after the test."""
    made: list[Receiver] = []
    try:
        yield made
    finally:
        for receiver in made:
            receiver.close()


def start(receivers: list[Receiver], **kwargs) -> Receiver:
    """A receiver serving on a free loopback port, closed with the `receivers` fixture."""
    receiver = Receiver(**kwargs)
    receivers.append(receiver)
    receiver.thread.start()
    return receiver
