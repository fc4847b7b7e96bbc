"""The web page watching two streams in one process: `python -m app --ui --model tiny --stream a=... --stream b=...`
driven by headless chromium (tests/ui_browser/streams_test.js). Each stream has its panel (frame, status), a
question sent to one stream is answered by that stream only, and the memory plot has a line per stream.
The screenshot is kept in artifacts/ui-test/streams.png (failure.png when a check failed)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.test_ui_browser import ARTIFACTS, BROWSER_DIR, CHROMIUM, REPO, AppProcess, browser, free_port

__all__ = ["browser"]  # the fixture: a missing browser fails (or skips) before the app starts


@pytest.fixture(scope="module")
def two_videos(tmp_path_factory) -> list:
    folder = tmp_path_factory.mktemp("ui-streams")
    videos = []
    for name, style in (("a", []), ("b", ["--plain"])):
        out = folder / f"{name}.mp4"
        subprocess.run(
            [sys.executable, "scripts/make_demo_video.py", "--duration", "20", "--size", "320x240", "--fps", "10"]
            + ["--scene-seconds", "5", "--out", str(out), *style],
            cwd=REPO,
            check=True,
            capture_output=True,
        )
        videos.append(out)
    return videos


def test_two_streams_each_have_a_panel_and_a_question_to_one_is_answered_by_it_only(browser, two_videos, tmp_path):
    port = free_port()
    a, b = two_videos
    app = AppProcess(
        ["--ui", "--model", "tiny", "--stream", f"a={a}", "--stream", f"b={b}", "--no-realtime", "--loop"]
        + ["--every", "0", "--budget", "256", "--max-new-tokens", "8", "--port", str(port)]
    )
    try:
        app.wait_ready(90)
        result = subprocess.run(
            ["node", str(BROWSER_DIR / "streams_test.js"), f"http://127.0.0.1:{port}/", str(tmp_path)],
            cwd=BROWSER_DIR,
            env=dict(os.environ, CHROMIUM_PATH=CHROMIUM),
            capture_output=True,
            text=True,
            timeout=150,
        )
    finally:
        code = app.interrupt()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for name in ("streams.png", "failure.png"):
        (ARTIFACTS / name).unlink(missing_ok=True)
        if (tmp_path / name).exists():
            shutil.copy(tmp_path / name, ARTIFACTS / name)
    report = f"browser stdout:\n{result.stdout}\nbrowser stderr:\n{result.stderr}\napp output:\n{app.output}"
    assert result.returncode == 0, report
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert "a.mp4" in seen["status_a"] and "b.mp4" in seen["status_b"]
    assert len(seen["askedTurns"]) == 1 and "stream b" in seen["answer"]
    assert code == 0 and "Traceback" not in app.output, app.output
