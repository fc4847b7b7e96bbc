"""The web page watching two streams in one process: `python -m app --ui --model tiny --stream a=... --stream b=...`
driven by headless chromium (tests/ui_browser/streams_test.js). Each stream has its panel (frame, status), a
question sent to one stream is answered by that stream only, and the memory plot has a line per stream.
The screenshot is kept in artifacts/ui-test/streams.png (failure.png when a check failed)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.ui.test_ui_browser import REPO, browser, drive_app

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
    a, b = two_videos
    seen, app, code = drive_app(
        ["--ui", "--model", "tiny", "--stream", f"a={a}", "--stream", f"b={b}", "--no-realtime", "--loop"]
        + ["--every", "0", "--budget", "256", "--max-new-tokens", "8"],
        "streams_test.js",
        tmp_path,
        [],
        ["streams.png"],
    )
    assert "a.mp4" in seen["status_a"] and "b.mp4" in seen["status_b"]
    assert len(seen["askedTurns"]) == 1 and "stream b" in seen["answer"]
    assert code == 0 and "Traceback" not in app.output, app.output
