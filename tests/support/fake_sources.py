"""Servers on a loopback address and port of the test's choosing that count who reaches them: a scripted RTSP
server (every request gets the same answer, e.g. a redirect) and an HTTP server that serves one file and keeps
each request's Host header. Two of them on 127.0.0.1 and 127.0.0.2 with one port stand in for the address a
name was checked at and the one it later resolves to. Both stop on leaving `with`."""

from __future__ import annotations

import functools
import http.server
import socket
import threading
from pathlib import Path


class FakeRtsp:
    """Answers every request on (host, port) with ``RTSP/1.0 {status}`` plus `headers` (e.g. ``Location: ...``);
    `connections` counts the connections it accepted; `port` 0 picks a free one."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, status: str = "404 Not Found", headers: str = ""):
        self.status, self.headers = status, headers
        self.connections = 0
        self._stop = threading.Event()
        self._listener = socket.create_server((host, port))
        self._listener.settimeout(0.1)
        self.port = self._listener.getsockname()[1]
        self.url = f"rtsp://{host}:{self.port}/live"
        self._threads = [threading.Thread(target=self._accept, daemon=True)]

    def __enter__(self) -> FakeRtsp:
        self._threads[0].start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for thread in list(self._threads):
            thread.join(5)
        self._listener.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            self.connections += 1
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        conn.settimeout(0.1)
        data = b""
        with conn:
            while not self._stop.is_set():
                try:
                    chunk = conn.recv(4096)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if not chunk:
                    return
                data += chunk
                while b"\r\n\r\n" in data:
                    head, data = data.split(b"\r\n\r\n", 1)
                    conn.sendall(self._reply(head).encode())

    def _reply(self, request: bytes) -> str:
        lines = request.decode("latin-1").split("\r\n")
        cseq = next((line.split(":", 1)[1].strip() for line in lines if line.lower().startswith("cseq:")), "1")
        return f"RTSP/1.0 {self.status}\r\nCSeq: {cseq}\r\n{self.headers}Content-Length: 0\r\n\r\n"


class FileHttp:
    """Serves the files of `folder` on (host, port); `hosts` holds each request's Host header."""

    def __init__(self, folder: Path, host: str = "127.0.0.1", port: int = 0) -> None:
        self.hosts: list[str | None] = []
        hosts = self.hosts

        class Handler(http.server.SimpleHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                hosts.append(self.headers.get("Host"))
                super().do_GET()

        self.httpd = http.server.ThreadingHTTPServer((host, port), functools.partial(Handler, directory=str(folder)))
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> FileHttp:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)
