"""`python -m app` watching two real RTSP streams (GStreamer's RTSP server on 127.0.0.1): the server of one is
killed and restarted mid-run; that stream reconnects and delivers clips again while the other never stops.

Needs Debian's GStreamer RTSP server: skipped without it, failed without it when EDGE_ASSISTANT_REQUIRE_TOOLS=1.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from bus import from_record
from tests.support.app_helpers import REPO, app_command
from tests.support.capture_helpers import Media
from tests.support.rtsp_server import RtspServer, require_rtsp_server

WAIT_S = 30.0


@pytest.fixture(scope="module")
def video(tmp_path_factory) -> Path:
    require_rtsp_server()
    media = Media(tmp_path_factory.mktemp("app-rtsp"))
    return media.video("live.mkv", "libx264", (160, 120), fps=25, duration_s=90.0, options={"preset": "ultrafast"})


def _events(log: Path) -> list[dict]:
    if not log.exists():
        return []
    lines = log.read_text().splitlines()
    return [from_record(json.loads(line)) for line in lines if line.endswith("}")]


def _wait(log: Path, app: subprocess.Popen, done, what: str) -> list[dict]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        events = _events(log)
        if done(events):
            return events
        assert app.poll() is None, f"the app ended while waiting for {what}"
        time.sleep(0.2)
    raise AssertionError(f"no {what} within {WAIT_S:.0f} s")


def _clips(events: list[dict], stream: str) -> list[dict]:
    return [e for e in events if e.TYPE == "clip" and e.stream == stream]


def test_a_restarted_rtsp_server_is_reconnected_while_the_other_stream_goes_on(video, tmp_path):
    log = tmp_path / "events.jsonl"
    with RtspServer(video) as door, RtspServer(video) as yard:
        app = subprocess.Popen(
            app_command(
                "--stream", f"door={door.url}", "--stream", f"yard={yard.url}", "--model", "tiny",
                "--fps", "2", "--clip-seconds", "1", "--every", "0", "--budget", "256", "--window", "16",
                "--quiet", "--log-jsonl", str(log),
            ),
            cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"}, start_new_session=True,
        )  # fmt: skip
        try:
            _wait(log, app, lambda ev: len(_clips(ev, "door")) >= 2 and len(_clips(ev, "yard")) >= 2, "both streams")
            door.restart(down_s=1.0)
            restarted_at = time.time()
            events = _wait(
                log,
                app,
                lambda ev: any(c.t_wall > restarted_at + 2.0 for c in _clips(ev, "door")),
                "clips of door after its server restarted",
            )
            app.send_signal(signal.SIGINT)
            _, stderr = app.communicate(timeout=30)
        finally:
            if app.poll() is None:
                os.killpg(app.pid, signal.SIGKILL)
                app.wait()
    assert app.returncode == 0, stderr[-2000:]
    door_events = [e for e in events if e.stream == "door" and e.TYPE == "capture"]
    changes = [(e.kind, e.state) for e in door_events if e.kind in ("reconnect", "reconnected")]
    assert changes[:2] == [("reconnect", "reconnecting"), ("reconnected", "watching")]
    yard_times = [c.t_wall for c in _clips(events, "yard")]
    during = [t for t in yard_times if restarted_at - 1.0 <= t <= restarted_at + 2.0]
    assert during, "the yard stream stopped while the door's server was down"
    assert not [e for e in events if e.stream == "yard" and e.TYPE in ("error", "capture")]
