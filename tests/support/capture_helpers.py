"""Helpers for the capture tests: real encoded videos made on demand, damaged copies, a local HTTP
MPEG-TS server that can cut or stall connections, and a loop that drains a CaptureThread."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from capture import CaptureThread, Clip, EndOfStream
from capture.synth import write_video

FAST_X26X = {"preset": "ultrafast"}


class Media:
    """Creates test videos in ``root`` on first use and caches them by name."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._made: dict[str, tuple[Path, list[float]]] = {}

    def video(self, name: str, codec: str = "libx264", size: tuple[int, int] = (320, 240), **kwargs) -> Path:
        """Path of ``name`` (extension picks the container); encoded once with ``write_video`` kwargs."""
        return self.video_and_times(name, codec, size, **kwargs)[0]

    def video_and_times(
        self, name: str, codec: str = "libx264", size: tuple[int, int] = (320, 240), **kwargs
    ) -> tuple[Path, list[float]]:
        if name not in self._made:
            path = self.root / name
            if codec.startswith("libx26"):
                kwargs.setdefault("options", FAST_X26X)
            times = write_video(path, codec, size, **kwargs)
            self._made[name] = (path, times)
        return self._made[name]

    def file(self, name: str, data: bytes) -> Path:
        path = self.root / name
        path.write_bytes(data)
        return path


def overwrite(data: bytes, offsets: list[int], length: int, seed: int = 0) -> bytes:
    """A copy of ``data`` with ``length`` pseudo-random bytes written at each offset (a corrupt file)."""
    rng = np.random.default_rng(seed)
    out = bytearray(data)
    for off in offsets:
        out[off : off + length] = rng.integers(0, 256, length, dtype=np.uint8).tobytes()
    return bytes(out)


@dataclass
class Drained:
    clips: list[Clip] = field(default_factory=list)
    end: EndOfStream | None = None

    @property
    def timestamps(self) -> list[float]:
        return [t for clip in self.clips for t in clip.timestamps]


def drain(capture: CaptureThread, timeout_s: float = 60.0) -> Drained:
    """Start ``capture`` (if needed) and read clips until ``EndOfStream``; fails after ``timeout_s``."""
    if not capture.is_alive() and not capture.finished.is_set():
        capture.start()
    out = Drained()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        item = capture.get_clip(timeout=0.5)
        if isinstance(item, EndOfStream):
            out.end = item
            assert capture.join(5.0), "capture thread did not end after EndOfStream"
            return out
        if item is not None:
            out.clips.append(item)
    capture.stop_event.set()
    capture.join(5.0)
    raise AssertionError(f"no EndOfStream within {timeout_s} s")


class TsServer:
    """Serves an MPEG-TS byte string over HTTP on 127.0.0.1, like a live broadcast.

    Connection i sends the stream from where the previous connection stopped ("live": what was sent
    is not sent again), or from the start when ``restart`` is True. ``plan[i]`` says how connection i
    ends: an int cuts it abruptly after that many bytes, ``"stall"`` sends half of the rest and then
    goes silent (until ``close``), None sends everything. Connections after the last one (or once all
    data was sent, in live mode) get 404. Live streams have no Content-Length (FFmpeg then reports
    any end of the body as an I/O error); ``content_length=True`` serves a finite file.
    """

    def __init__(
        self, data: bytes, plan: list[int | str | None], restart: bool = False, content_length: bool = False
    ) -> None:
        self.data = data
        self.plan = plan
        self.restart = restart
        self.content_length = content_length
        self.position = 0
        self.requests = 0
        self.released = threading.Event()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                server.serve(self)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/live.ts"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), name="ts-server", daemon=True)

    def serve(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        i = self.requests
        self.requests += 1
        start = 0 if self.restart else self.position
        if i >= len(self.plan) or start >= len(self.data):
            handler.send_error(404)
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "video/mp2t")
        handler.send_header("Connection", "close")
        action = self.plan[i]
        end = len(self.data)
        if isinstance(action, int):
            end = min(end, start + action)
        elif action == "stall":
            end = start + (end - start) // 2
        if self.content_length:  # a finite file: FFmpeg can tell a complete body from a cut one
            handler.send_header("Content-Length", str(len(self.data) - start))
        handler.end_headers()
        try:
            for pos in range(start, end, 188 * 16):
                handler.wfile.write(self.data[pos : min(end, pos + 188 * 16)])
                self.position = min(end, pos + 188 * 16)
            handler.wfile.flush()
            if action == "stall":
                self.released.wait(30)
        except OSError:
            return
        if isinstance(action, int) or action == "stall":
            handler.connection.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> TsServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


class SilentServer:
    """Accepts TCP connections on 127.0.0.1 (kernel backlog) and never answers: an open timeout."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/never.ts"

    def __enter__(self) -> SilentServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


def closed_port_url() -> str:
    """An http URL on 127.0.0.1 where nothing listens (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/stream.ts"
