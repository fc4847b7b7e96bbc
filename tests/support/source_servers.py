"""HTTP servers on 127.0.0.1 that stand in for cameras and recorders in the app's and the page's tests: a folder's
files served whole, and one MPEG-TS file sent at its own pace (a live camera). Both stop on leaving `with`."""

from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path


class _Server:
    def __init__(self, handler: type[http.server.BaseHTTPRequestHandler]) -> None:
        self.closing = threading.Event()
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.closing.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(5)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


class FolderServer(_Server):
    """Serves the files of `folder` (a recorder's clips); `url(name)` is one's address."""

    def __init__(self, folder: Path) -> None:
        super().__init__(functools.partial(_Quiet, directory=str(folder)))

    def url(self, name: str) -> str:
        return f"{self.base}/{name}"


class PacedServer(_Server):
    """Sends one MPEG-TS file at `seconds` of playing time (bytes evenly over that time), to every GET, like a live
    camera; `url` is its address (the file's name)."""

    def __init__(self, path: Path, seconds: float) -> None:
        data = Path(path).read_bytes()
        closing = threading.Event()
        chunk = 188 * 32
        pause = seconds * chunk / len(data)

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "video/mp2t")
                self.end_headers()
                try:
                    for pos in range(0, len(data), chunk):
                        if closing.wait(pause):
                            return
                        self.wfile.write(data[pos : pos + chunk])
                except OSError:
                    return

        super().__init__(Handler)
        self.closing = closing
        self.url = f"{self.base}/{Path(path).name}"


__all__ = ["FolderServer", "PacedServer"]
