"""An MPEG-TS server on 127.0.0.1 that wants an HTTP Basic login, for the tests that look for leaked passwords."""

from __future__ import annotations

import base64
import http.server

from tests.support.capture_helpers import TsServer


class LoginTsServer(TsServer):
    """`TsServer` answering 401 (with a Basic challenge) to every request without `user:password`; `logins`
    counts the requests that came with the right one."""

    def __init__(self, data: bytes, plan: list[int | str | None], user: str, password: str, **kwargs) -> None:
        super().__init__(data, plan, **kwargs)
        self.expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        self.logins = 0
        self.refused = 0

    def serve(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        if handler.headers.get("Authorization") != self.expected:
            self.refused += 1
            handler.send_response(401)
            handler.send_header("WWW-Authenticate", 'Basic realm="camera"')
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        self.logins += 1
        super().serve(handler)
