"""Redaction by parsing (issue 39): camera passwords holding quotes, brackets, backticks, blanks and '@', and
query keys such as `pw=` and `p=`, never show, in any form a source is shown in (the bare URL, a source's
description, an error quoting it with `repr`, a JSON line), nor in the real app's event log, timeline and
`history`."""

from __future__ import annotations

import json
import socket

import pytest

from app.__main__ import main
from bus.redact import redact_source
from capture.config import parse_source
from tests.support.app_helpers import run_app, video

HOSTILE = ["SEC'RET", 'SEC"RET', "SEC<RET>", "SEC`RET", "SEC RET", "SEC'\"<>` @RET", "SEC>'RET"]


def _forms(url: str) -> list[str]:
    """Every way a source reaches a text: bare, described, quoted by an error (repr), one line of several."""
    described = parse_source(url).describe()
    error = f"capture of {described} failed: {OSError(5, 'Input/output error', url)}"
    return [url, described, error, f"{error}\nreconnecting to {described} in 1 s"]


@pytest.mark.parametrize("password", HOSTILE)
def test_hostile_userinfo_passwords_never_show(password: str) -> None:
    url = f"rtsp://admin:{password}@10.0.0.5:554/live?channel=1"
    for text in _forms(url):
        out = redact_source(text)
        for piece in ("SEC", "RET"):
            assert piece not in out, (text, out)
        assert "***@10.0.0.5:554/live?channel=1" in out
        assert redact_source(out) == out
        assert "SEC" not in json.dumps({"message": out})  # the event log writes redacted text as JSON
    out = redact_source(f"<{url}> and `{url}`")  # the userinfo is found by '@', whatever encloses the URL
    assert "SEC" not in out and "RET" not in out


@pytest.mark.parametrize("password", HOSTILE)
@pytest.mark.parametrize("key", ["pw", "p", "PWD", "pass_word", "loginPas", "x-api-key", "p%77"])
def test_hostile_query_passwords_never_show(password: str, key: str) -> None:
    url = f"http://10.0.0.7/cgi/stream.cgi?usr=admin&{key}={password}&res=hd"
    for text in _forms(url):
        out = redact_source(text)
        assert "SEC" not in out and "RET" not in out, (text, out)
        assert f"usr=admin&{key}=***" in out


def test_a_secret_last_in_the_query_keeps_the_message_after_it() -> None:
    url = "http://10.0.0.7/x?usr=admin&pw=SEC'RET"
    out = redact_source(parse_source(url).describe() + ": connection refused")
    assert out == "stream 'http://10.0.0.7/x?usr=admin&pw=***': connection refused"


@pytest.mark.parametrize("key", ["usr", "user", "channel", "res", "fps", "stream", "mail"])
def test_plain_keys_stay(key: str) -> None:
    from bus.redact import secret_key

    assert not secret_key(key)
    assert redact_source(f"http://cam/x?{key}=1&b=2") == f"http://cam/x?{key}=1&b=2"


@pytest.mark.parametrize("value", ['"SEC RET"', "'SEC RET'", '"SEC\\"RET"', "SEC'RET"])
def test_gstreamer_passwords_never_show(value: str) -> None:
    out = redact_source(f"gst:rtspsrc location=rtsp://cam/x user-id=admin user-pw={value} ! appsink")
    assert "SEC" not in out and "RET" not in out
    assert "user-pw=*** ! appsink" in out


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_hostile_passwords_appear_nowhere_in_the_app(tmp_path, capsys):
    """The real app: two down cameras (they reconnect, so their sources are shown again and again) with hostile
    passwords in the userinfo and in `pw=`; stdout, stderr, the event log, the timeline's bytes and `history`. The run
    is a real process (its own logging prints through the redacting formatter); `history` runs in this one."""
    log, timeline = tmp_path / "events.jsonl", tmp_path / "timeline" / "timeline.sqlite"
    one = f"rtsp://admin:SEC'\"<>` @RET@127.0.0.1:{_closed_port()}/live"
    two = f"rtsp://127.0.0.1:{_closed_port()}/live?usr=admin&pw=SEC'\"<>` RET"
    done = run_app(
        "--stream", f"a={video(8)}", "--stream", f"one={one}", "--stream", f"two={two}", "--model", "tiny",
        "--no-realtime", "--every", "2", "--budget", "256", "--window", "16", "--max-new-tokens", "4", "--fps", "2",
        "--clip-seconds", "1", "--max-rounds", "3", "--log-jsonl", str(log), "--timeline", str(timeline), "-v",
        timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    capsys.readouterr()
    assert main(["history", "--timeline", str(timeline), "--since", "1h"]) == 0
    history = capsys.readouterr()
    shown = {"stdout": done.stdout, "stderr": done.stderr, "log": log.read_text(), "history": history.out}
    assert "rtsp://***@127.0.0.1" in shown["log"] and "pw=***" in shown["log"]
    for where, text in shown.items():
        assert "SEC" not in text and "RET" not in text, f"the password is in {where}"
    stored = b"".join(p.read_bytes() for p in timeline.parent.rglob("*") if p.is_file())
    assert b"***@127.0.0.1" in stored and b"SEC" not in stored and b"RET" not in stored
