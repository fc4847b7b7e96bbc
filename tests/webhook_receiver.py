"""A real HTTP receiver for the webhook tests, on 127.0.0.1: records every POST."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WAIT_S = 10.0


class Receiver:
    """An HTTP server on 127.0.0.1 that records every POST and answers with `statuses` in turn (then 200).
    While `gate` is given and not set, each request waits on it (a slow receiver)."""

    def __init__(self, statuses: tuple[int, ...] = (), gate: threading.Event | None = None) -> None:
        self.statuses = list(statuses)
        self.gate = gate
        self.requests: list[tuple[dict[str, str], bytes]] = []
        self.entered = threading.Event()
        self.cond = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.entered.set()
                if receiver.gate is not None:
                    receiver.gate.wait(WAIT_S * 3)
                with receiver.cond:
                    receiver.requests.append((dict(self.headers), body))
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                    receiver.cond.notify_all()
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook/token-in-path"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05})

    def wait_for(self, n: int) -> list[tuple[dict[str, str], bytes]]:
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.requests) >= n, WAIT_S), f"{len(self.requests)} of {n}"
            return list(self.requests)

    def close(self) -> None:
        if self.gate is not None:
            self.gate.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()
