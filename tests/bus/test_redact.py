"""`bus.redact.redact_source`: no camera login survives in a text that shows or stores a source."""

from __future__ import annotations

import logging

import pytest

from bus.redact import RedactingFormatter, has_secret, redact_source


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("rtsp://user:pass@10.0.0.5:554/x", "rtsp://***@10.0.0.5:554/x"),
        ("rtsp://admin@cam.local/stream", "rtsp://***@cam.local/stream"),
        ("RTSPS://Admin:Pw@cam:322/live", "RTSPS://***@cam:322/live"),
        ("http://u:p%40ss%3Aword@127.0.0.1:8080/v.ts", "http://***@127.0.0.1:8080/v.ts"),
        ("rtsp://user:p@ss@word@10.0.0.5/x", "rtsp://***@10.0.0.5/x"),  # unencoded '@' in the password
        ("rtsp://user:pa:ss@[fe80::1]:554/x", "rtsp://***@[fe80::1]:554/x"),
        ("rtsp://user:pass@host", "rtsp://***@host"),
        ("rtsp://user:pass@host?x=1", "rtsp://***@host?x=1"),
        # query-string secrets of common cameras; the user name in the query is not a secret
        (
            "http://10.0.0.7/cgi-bin/CGIStream.cgi?cmd=GetMJStream&usr=admin&pwd=s3cret",
            "http://10.0.0.7/cgi-bin/CGIStream.cgi?cmd=GetMJStream&usr=admin&pwd=***",
        ),
        ("http://cam/video.mjpg?user=admin&password=s3cret", "http://cam/video.mjpg?user=admin&password=***"),
        ("https://cloud/live.m3u8?Token=abc.def&res=hd", "https://cloud/live.m3u8?Token=***&res=hd"),
        (
            "http://cam/snap.cgi?loginuse=admin&loginpas=12345#frag",
            "http://cam/snap.cgi?loginuse=admin&loginpas=***#frag",
        ),
        # an '@' after the path is not userinfo
        ("http://host/path?mail=a@b.example", "http://host/path?mail=a@b.example"),
        ("http://host:8080/a@b", "http://host:8080/a@b"),
        # GStreamer rtspsrc properties
        (
            "gst:rtspsrc location=rtsp://cam/x user-id=admin user-pw=secret ! appsink",
            "gst:rtspsrc location=rtsp://cam/x user-id=admin user-pw=*** ! appsink",
        ),
        ('rtspsrc proxy-pw="a b" ! appsink', "rtspsrc proxy-pw=*** ! appsink"),
        # nothing to hide
        ("clip.mp4", "clip.mp4"),
        ("rtsp://10.0.0.5:554/x", "rtsp://10.0.0.5:554/x"),
        ("", ""),
    ],
)
def test_redacts_one_source(text: str, expected: str) -> None:
    assert redact_source(text) == expected
    assert redact_source(expected) == expected  # idempotent
    assert has_secret(text) == (text != expected)


def test_several_urls_inside_a_message() -> None:
    text = (
        "cannot open stream 'rtsp://a:one@10.0.0.5/x': [Errno 111] Connection refused: "
        "'rtsp://a:one@10.0.0.5/x'; also http://b:two@cam2/v?password=three and \"rtsps://c:four@cam3\""
    )
    out = redact_source(text)
    for secret in ("one", "two", "three", "four"):
        assert secret not in out.replace("Connection", "")
    assert out.count("***@") == 4
    # a secret value in a URL that no quote encloses runs to the next URL or the line end (it may hold blanks)
    assert "10.0.0.5/x" in out and "cam2/v?password=***rtsps://***@cam3" in out


def test_formatter_redacts_messages_arguments_and_tracebacks() -> None:
    formatter = RedactingFormatter("%(levelname)s %(message)s")
    try:
        raise OSError("Connection refused: 'rtsp://u:SECRETPW@127.0.0.1:1/x'")
    except OSError as err:
        record = logging.LogRecord("t", logging.ERROR, __file__, 1, "failed %s", ("http://u:SECRETPW@h/",), None)
        record.exc_info = (type(err), err, err.__traceback__)
    text = formatter.format(record)
    assert "SECRETPW" not in text
    assert "http://***@h/" in text and "rtsp://***@127.0.0.1:1/x" in text
