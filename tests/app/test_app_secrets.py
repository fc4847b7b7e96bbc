"""A camera password given in a source URL never shows or is stored: the real app (`--model tiny`) watches a
stream that wants a login (a real HTTP MPEG-TS server on 127.0.0.1) and one that is down (rtsp on a closed
port: it goes on reconnecting), with the event log and the timeline on; then stdout, stderr, the log, every
byte of the timeline's folder and the page's /config are searched for the password. The capture still logs in
with it."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.support.app_helpers import REPO, app_command, of_type, read_log, run_app, video
from tests.support.capture_helpers import Media
from tests.support.secret_servers import LoginTsServer

SECRET = "SECRETPW"
PASSWORD = f"{SECRET}@p%2Fw"  # an '@' and a percent-encoded '/' in it too
COMMON = ("--model", "tiny", "--no-realtime", "--every", "2", "--budget", "256", "--window", "16",
          "--max-new-tokens", "4", "--fps", "2", "--clip-seconds", "1")  # fmt: skip


@pytest.fixture(scope="module")
def ts_bytes(tmp_path_factory) -> bytes:
    media = Media(tmp_path_factory.mktemp("secrets"))
    return media.video("live.ts", "libx264", (96, 64), fps=10, duration_s=6.0, options={"g": "10"}).read_bytes()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _folder_bytes(folder: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file())


def test_a_password_in_a_source_url_appears_nowhere_and_the_event_log_is_private(ts_bytes, tmp_path):
    log, timeline = tmp_path / "new" / "events.jsonl", tmp_path / "timeline" / "timeline.sqlite"
    down = f"rtsp://admin:{PASSWORD}@127.0.0.1:{_closed_port()}/live"
    with LoginTsServer(ts_bytes, [None], user="viewer", password=SECRET) as server:
        url = server.url.replace("http://", f"http://viewer:{SECRET}@")
        done = run_app(
            "--stream", f"a={video(12)}", "--stream", f"cam={url}", "--stream", f"door={down}", *COMMON,
            "--max-rounds", "6", "--log-jsonl", str(log), "--timeline", str(timeline), "-v", timeout=240,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert server.logins >= 1  # the capture logged in with the real password
    events = read_log(log)
    assert [e for e in of_type(events, "clip") if e.stream == "cam"], "no clip of the stream behind the login"
    assert [e for e in of_type(events, "capture") if e.stream == "door" and e.state == "reconnecting"]
    watching = [e.message for e in of_type(events, "status") if e.message.startswith("watching stream")]
    assert any("http://***@127.0.0.1" in m for m in watching) and any("rtsp://***@127.0.0.1" in m for m in watching)
    for where, text in (("stdout", done.stdout), ("stderr", done.stderr), ("log", log.read_text())):
        assert SECRET not in text, f"the password is in {where}"
    stored = _folder_bytes(timeline.parent)
    assert b"***@127.0.0.1" in stored  # the rows are there, without the password
    assert SECRET.encode() not in stored and SECRET.encode("utf-16-le") not in stored
    # the event log (in a folder the run made) is the owner's only
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_page_never_sends_the_password(ts_bytes, tmp_path):
    port = _free_port()
    log = tmp_path / "events.jsonl"
    with LoginTsServer(ts_bytes, [None], user="viewer", password=SECRET) as server:
        url = server.url.replace("http://", f"http://viewer:{SECRET}@")
        app = subprocess.Popen(
            app_command("--ui", "--port", str(port), "--stream", f"cam={url}", *COMMON, "--log-jsonl", str(log)),
            cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True,
        )  # fmt: skip
        try:
            deadline, config = time.monotonic() + 180, None
            while time.monotonic() < deadline and config is None:
                assert app.poll() is None, app.stderr.read()[-3000:]
                try:
                    config = httpx.get(f"http://127.0.0.1:{port}/config", timeout=5).text
                except httpx.HTTPError:
                    time.sleep(0.5)
            assert config is not None, "the page did not come up"
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not (log.exists() and '"type": "clip"' in log.read_text()):
                time.sleep(0.3)
            app.send_signal(signal.SIGINT)
            stdout, stderr = app.communicate(timeout=60)
        finally:
            if app.poll() is None:
                os.killpg(app.pid, signal.SIGKILL)
    assert "http://***@127.0.0.1" in config  # the pre-filled source box: which camera, not its login
    assert server.logins >= 1
    for where, text in (("/config", config), ("stdout", stdout), ("stderr", stderr), ("log", log.read_text())):
        assert SECRET not in text, f"the password is in {where}"
