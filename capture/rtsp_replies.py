"""What an RTSP server sends, read the way FFmpeg reads it, to stop a redirect before FFmpeg sees it: `ReplyScanner`.

FFmpeg's RTSP client follows a ``3xx`` reply's ``Location`` to any host (``libavformat/rtsp.c``, no option turns it
off). The relay in ``capture.rtsp_guard`` passes the server's bytes through a scanner that splits them into
interleaved packets (``$``, channel, 16-bit length) and replies (lines up to a blank one, then ``Content-Length``
bytes), with FFmpeg's rules: lines end at ``\\n``, every ``\\r`` is dropped, a NUL ends a line's text, a ``$`` at a
line's start inside a reply makes FFmpeg skip a packet. A reply's head is held back until it is complete, and
one that is a redirect (``RTSP/x.y 3xx``), names a ``Location``, or could be read two ways (a ``$`` inside it,
an odd ``Content-Length``) is refused: nothing of it is passed on.
"""

from __future__ import annotations

import re

MAX_HEAD_BYTES = 64 * 1024  # a reply head larger than this is refused (FFmpeg's own lines are 4 KiB)
MAX_BODY_BYTES = 1024 * 1024  # an SDP is at most 16 KiB for FFmpeg
_CONTENT_LENGTH = re.compile(rb"content-length:[ \t\v\f]*([+-]?\d*)", re.IGNORECASE)
_STATUS_DIGITS = re.compile(rb"[+-]?\d+")


class ReplyScanner:
    """Fed the server's bytes in order; returns what may go on to FFmpeg. `refusal` says why it stopped."""

    def __init__(self) -> None:
        self.refusal: str | None = None
        self._buf = bytearray()
        self._skip = 0  # bytes of a packet or a body still to pass on unread

    def feed(self, data: bytes) -> bytes:
        """The bytes of `data` (and of earlier calls) that may be passed on; nothing once `refusal` is set."""
        if self.refusal is not None:
            return b""
        self._buf += data
        out = bytearray()
        while self._buf:
            if self._skip:
                n = min(self._skip, len(self._buf))
                out += self._buf[:n]
                del self._buf[:n]
                self._skip -= n
            elif self._buf[0] == 0x24:  # '$': an interleaved packet
                if len(self._buf) < 4:
                    break
                self._skip = 4 + int.from_bytes(self._buf[2:4], "big")
            else:
                head = self._head()
                if head is None:
                    break
                if self.refusal is not None:
                    return b""
                size, body = head
                self._skip = size + body
        return bytes(out)

    def _head(self) -> tuple[int, int] | None:
        """(head bytes, body bytes) of the complete reply head at the buffer's start; None while incomplete or
        when refused (then `refusal` is set)."""
        lines: list[bytes] = []
        start = 0
        while True:
            end = self._buf.find(b"\n", start)
            if end < 0:
                if len(self._buf) > MAX_HEAD_BYTES:
                    self.refusal = f"a reply head over {MAX_HEAD_BYTES} bytes"
                return None
            raw = bytes(self._buf[start:end]).replace(b"\r", b"")
            start = end + 1
            if raw.startswith(b"$") and lines:
                self.refusal = "a reply with an interleaved packet inside its head"
                return None
            text = raw.split(b"\0", 1)[0]
            if not text:
                break
            lines.append(text)
        body = _body_length(lines)
        self.refusal = _refusal(lines) or (None if body is not None else "a Content-Length below 0 or over 1 MiB")
        if self.refusal is not None or body is None:
            return None
        return start, body


def _refusal(lines: list[bytes]) -> str | None:
    words = lines[0].split() if lines else []
    if len(words) >= 2 and words[0].startswith(b"RTSP/"):
        digits = _STATUS_DIGITS.match(words[1])
        if digits and 300 <= int(digits.group()) < 400:
            return f"a redirect ({lines[0].decode('latin-1')[:80]}){_location(lines)}"
    location = _location(lines)
    return f"a reply naming another address{location}" if location else None


def _location(lines: list[bytes]) -> str:
    for line in lines:
        if line[:9].lower() == b"location:":
            return f" to {line[9:].strip().decode('latin-1')[:200]}"
    return ""


def _body_length(lines: list[bytes]) -> int | None:
    """The body's size as FFmpeg reads it (the last Content-Length, strtol), None when out of bounds."""
    length: int | None = 0
    for line in lines:
        match = _CONTENT_LENGTH.match(line)
        if match:
            value = int(match.group(1)) if match.group(1).lstrip(b"+-") else 0
            length = value if 0 <= value <= MAX_BODY_BYTES else None
    return length
