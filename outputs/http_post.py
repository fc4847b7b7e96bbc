"""One HTTP POST with hard bounds, for webhooks that may answer with anything.

A webhook only needs the receiver's status code, so this client reads no more than the first final status
line (after any 1xx interim answers) and then closes the connection:
- it never reads more than `limit` bytes of an answer (an endless body or endless headers cost nothing);
- the whole request (connect, TLS handshake, sending, the answer's status line) has one deadline: each
  socket operation may take only what is left of it, so a receiver trickling one byte at a time cannot hold
  the request beyond it;
- it never follows redirects (a 3xx is returned like any other status; the caller decides);
- it uses no proxy from the environment: the request goes to the configured host only.
"""

from __future__ import annotations

import re
import socket
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

RESPONSE_LIMIT = 64 * 1024  # bytes of an answer read at most
RECV_BYTES = 4096
_STATUS_LINE = re.compile(rb"HTTP/1\.[01] (\d{3})(?: [^\r\n]*)?")


class PostError(Exception):
    """A POST that got no usable status. `reason` is one line without the URL's path or query; `retry` says
    whether trying again may help (connection errors, timeouts, garbled answers)."""

    def __init__(self, reason: str, retry: bool, bytes_read: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry = retry
        self.bytes_read = bytes_read


@dataclass(frozen=True)
class PostResult:
    """The final status code and how many bytes of the answer were read to find it."""

    status: int
    bytes_read: int


def request_bytes(url: str, body: bytes, headers: Mapping[str, str]) -> bytes:
    """The HTTP/1.1 request: POST to the URL's path and query, `Connection: close`, then `body`."""
    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname
    host += f":{parts.port}" if parts.port else ""  # never the URL's userinfo
    lines = [f"POST {target} HTTP/1.1", f"Host: {host}", f"Content-Length: {len(body)}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("ascii") + body


def final_status(answer: bytes | bytearray) -> int | None:
    """The status of the first non-1xx status line in `answer` (1xx blocks skipped), or None while the answer
    does not hold one yet. ValueError when the answer is not HTTP/1.x."""
    start = 0
    while True:
        end = answer.find(b"\r\n", start)
        if end < 0:
            if len(answer) - start >= 12 and not answer.startswith(b"HTTP/1.", start):
                raise ValueError("the answer is not HTTP/1.x")
            return None
        match = _STATUS_LINE.fullmatch(answer, start, end)
        if match is None:
            raise ValueError("the answer is not HTTP/1.x (no status line)")
        status = int(match.group(1))
        if status >= 200:
            return status
        block_end = answer.find(b"\r\n\r\n", start)
        if block_end < 0:
            return None
        start = block_end + 4


def post(
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    timeout_s: float,
    limit: int = RESPONSE_LIMIT,
    ssl_context: ssl.SSLContext | None = None,
) -> PostResult:
    """POSTs `body` to the http:// or https:// `url` and returns the final status, all within `timeout_s`
    seconds and reading at most `limit` bytes of the answer. Raises PostError otherwise."""
    parts = urlsplit(url)
    https = parts.scheme == "https"
    deadline = time.monotonic() + timeout_s
    answer = bytearray()

    def left() -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        return remaining

    try:
        sock = socket.create_connection((parts.hostname, parts.port or (443 if https else 80)), timeout=left())
        try:
            if https:
                context = ssl_context or ssl.create_default_context()
                sock = context.wrap_socket(sock, server_hostname=parts.hostname)  # the handshake has `left()` too
            sock.settimeout(left())
            sock.sendall(request_bytes(url, body, headers))  # the timeout bounds the whole sendall
            while len(answer) < limit:
                sock.settimeout(left())
                chunk = sock.recv(min(RECV_BYTES, limit - len(answer)))
                if not chunk:
                    break
                answer += chunk
                status = final_status(answer)
                if status is not None:
                    return PostResult(status, len(answer))
        finally:
            sock.close()
    except TimeoutError:
        raise PostError(f"no answer within the {timeout_s:g} s deadline", True, len(answer)) from None
    except ssl.SSLCertVerificationError as exc:
        raise PostError(f"TLS certificate refused ({exc.verify_message})", False) from None
    except ValueError as exc:
        raise PostError(str(exc), True, len(answer)) from None
    except OSError as exc:
        raise PostError(f"cannot reach it ({exc.strerror or type(exc).__name__})", True, len(answer)) from None
    if len(answer) >= limit:
        raise PostError(f"no status line in the first {limit // 1024} KiB of the answer", True, len(answer))
    raise PostError("the receiver closed the connection without an answer", True, len(answer))
