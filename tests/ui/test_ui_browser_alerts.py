"""The alerts on the web page: `python -m app --ui --model tiny --stream a=... --config ALERTS.toml` with a watch
that always fires (threshold 0, on_after 1), driven by headless chromium (tests/ui_browser/alerts_test.js): the
banner names the alert and its stream, the Alerts list shows its snapshot thumbnail, the stream's status its
latest p_yes. The screenshot is kept in artifacts/ui-test/alerts.png (failure.png when a check failed)."""

from __future__ import annotations

import subprocess
import sys

from tests.ui.test_ui_browser import REPO, browser, drive_app

__all__ = ["browser"]  # the fixture: a missing browser fails (or skips) before the app starts

ALERTS_TOML = """\
[alerts.person]
question = "Is there a person?"
every = 4
threshold = 0.0
on_after = 1
"""


def test_an_alert_that_always_fires_shows_the_banner_and_a_thumbnail_in_the_list(browser, tmp_path):
    video = tmp_path / "a.mp4"
    subprocess.run(
        [sys.executable, "scripts/make_demo_video.py", "--duration", "12", "--size", "320x240", "--fps", "10"]
        + ["--scene-seconds", "4", "--out", str(video)],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    config = tmp_path / "alerts.toml"
    config.write_text(ALERTS_TOML)
    seen, app, code = drive_app(
        ["--ui", "--model", "tiny", "--stream", f"a={video}", "--no-realtime", "--loop", "--every", "0"]
        + ["--config", str(config), "--budget", "256"],
        "alerts_test.js",
        tmp_path,
        ["person", "a"],
        ["alerts.png"],
    )
    assert "person" in seen["banner"] and "Is there a person?" in seen["banner"]
    assert seen["thumbnail"]["naturalWidth"] > 0 and seen["thumbnail"]["src"].startswith("data:image/jpeg")
    assert "Is there a person?" in seen["row"]
    assert code == 0 and "Traceback" not in app.output, app.output
