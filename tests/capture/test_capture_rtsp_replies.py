"""The RTSP relay's reading of the server's bytes (capture.rtsp_replies): it must agree with FFmpeg's on where each
reply starts and ends, hold a reply's head back until it is complete, and pass nothing of a redirect, however the
bytes are split or dressed (FFmpeg drops every CR, ends a line's text at a NUL, skips a packet at a '$')."""

from __future__ import annotations

import pytest

from capture.rtsp_replies import ReplyScanner

OK = b"RTSP/1.0 200 OK\r\nCSeq: 1\r\nContent-Length: 5\r\n\r\nv=0\r\n"
PACKET = b"$\x00\x00\x03abc"
REDIRECT = b"RTSP/1.0 302 Moved\r\nCSeq: 2\r\nLocation: rtsp://10.0.0.1/x\r\n\r\n"


def _feed_bytewise(data: bytes) -> tuple[bytes, ReplyScanner]:
    scanner = ReplyScanner()
    out = b"".join(scanner.feed(data[i : i + 1]) for i in range(len(data)))
    return out, scanner


def test_replies_and_interleaved_packets_pass_whole_in_any_split() -> None:
    stream = OK + PACKET + OK + PACKET
    out, scanner = _feed_bytewise(stream)
    assert out == stream and scanner.refusal is None
    assert ReplyScanner().feed(stream) == stream


def test_a_redirect_passes_nothing_of_itself_even_split_byte_by_byte() -> None:
    out, scanner = _feed_bytewise(OK + PACKET + REDIRECT + OK)
    assert out == OK + PACKET
    assert scanner.refusal == "a redirect (RTSP/1.0 302 Moved) to rtsp://10.0.0.1/x"
    assert scanner.feed(OK) == b""


@pytest.mark.parametrize(
    "trick",
    [
        b"RTSP/1.0\t301 Moved\nLocation: rtsp://10.0.0.1/\n\n",  # bare newlines, a tab
        b"RTSP/1.0 3\r02 Moved\r\n\r\n",  # FFmpeg drops a CR anywhere: 302
        b"RTSP/1.0 200 OK\r\nlocation: rtsp://10.0.0.1/\r\n\r\n",  # a Location without a 3xx
        b"RTSP/1.0 200 OK\r\nCSeq: 1\r\n$\x00\x00\x04\r\n\r\nRTSP/1.0 302 M\r\n\r\n",  # a packet inside a head
        b"RTSP/1.0 200 OK\r\nContent-Length: -5\r\n\r\n",
        b"RTSP/1.0 200 OK\r\nContent-Length: 99999999999\r\n\r\n",
    ],
)
def test_heads_read_two_ways_or_naming_an_address_are_refused(trick: bytes) -> None:
    out, scanner = _feed_bytewise(OK + trick + OK)
    assert out == OK
    assert scanner.refusal is not None


def test_a_blank_line_hidden_behind_cr_or_nul_ends_the_head_as_for_ffmpeg() -> None:
    # FFmpeg reads "\r\r\n" and "\0junk\n" as blank lines: the next reply starts right after them
    for blank in (b"\r\r\n", b"\x00junk\r\n"):
        stream = b"RTSP/1.0 200 OK\r\nCSeq: 1\r\n" + blank + REDIRECT
        out, scanner = _feed_bytewise(stream)
        assert out == stream[: len(stream) - len(REDIRECT)]
        assert scanner.refusal is not None and "302" in scanner.refusal


def test_a_head_that_never_ends_is_refused() -> None:
    scanner = ReplyScanner()
    assert scanner.feed(b"RTSP/1.0 200 OK\r\n" + b"X-Pad: " + b"a" * 70_000) == b""
    assert scanner.refusal is not None and "over" in scanner.refusal
