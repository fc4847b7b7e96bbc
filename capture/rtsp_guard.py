"""A relay between FFmpeg and one checked RTSP server address: `RtspGuard`.

For an ``rtsp://`` source chosen while running, FFmpeg connects to this relay on 127.0.0.1; the relay connects to
the address ``capture.policy`` checked (an IP, so no second DNS answer can move it: rebinding) and nowhere else,
and passes the server's bytes through ``capture.rtsp_replies.ReplyScanner``: a redirect ends the connection
before FFmpeg reads it, so FFmpeg never opens the address it names. RTP comes interleaved on the same
connection (the source is opened with ``rtsp_transport=tcp``).

    with RtspGuard("203.0.113.7", 554, timeout_s=10) as guard:
        av.open(f"rtsp://127.0.0.1:{guard.port}/stream1", options={"rtsp_transport": "tcp"})
"""

from __future__ import annotations

import logging
import socket
import threading

from capture.rtsp_replies import ReplyScanner

logger = logging.getLogger(__name__)
_CHUNK = 64 * 1024


class RtspGuard:
    """Listens on 127.0.0.1:`port`; relays each connection to `address`:`server_port` (an IP literal).
    `refusal`: what the server sent that was refused (a redirect), or None. `close()` ends every connection and
    joins every thread it started."""

    def __init__(self, address: str, server_port: int, timeout_s: float) -> None:
        self.address, self.server_port, self.timeout_s = address, server_port, timeout_s
        self.refusal: str | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port = self._listener.getsockname()[1]
        self._start(self._accept, "rtsp-guard-accept")

    def __enter__(self) -> RtspGuard:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self, target, name: str, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                server = socket.create_connection((self.address, self.server_port), timeout=self.timeout_s)
            except OSError as err:
                logger.info("RTSP relay: cannot reach %s:%d: %s", self.address, self.server_port, err)
                client.close()
                continue
            client.settimeout(None)
            server.settimeout(None)
            with self._lock:
                if self._stop.is_set():  # closed while connecting
                    client.close()
                    server.close()
                    return
                self._sockets += [client, server]
            self._start(self._pump, "rtsp-guard-up", client, server, None)
            self._start(self._pump, "rtsp-guard-down", server, client, ReplyScanner())

    def _pump(self, source: socket.socket, sink: socket.socket, scanner: ReplyScanner | None) -> None:
        """Copies `source` to `sink` until either ends; through `scanner` when given (the server's side)."""
        try:
            while data := source.recv(_CHUNK):
                if scanner is not None:
                    data = scanner.feed(data)
                    if scanner.refusal is not None:
                        self.refusal = self.refusal or scanner.refusal
                        logger.warning("RTSP relay to %s: refused %s", self.address, scanner.refusal)
                        break
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            _shut(sock)

    def close(self) -> None:
        """Stops listening, ends every relayed connection, joins the threads (idempotent)."""
        self._stop.set()
        self._listener.close()
        accepter = self._threads[0]
        if accepter is not threading.current_thread():
            accepter.join(self.timeout_s + 1.0)  # then no connection is added any more
        with self._lock:
            sockets, threads = list(self._sockets), list(self._threads[1:])
        for sock in sockets:
            _shut(sock)
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(5.0)
        for sock in sockets:
            sock.close()


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
