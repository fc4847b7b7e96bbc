"""The alerts on the web page: `python -m app --ui --model tiny --stream a=... --config ALERTS.toml` with a watch
that always fires (threshold 0, on_after 1), driven by headless chromium (tests/ui_browser/alerts_test.js): the
banner names the alert and its stream, the Alerts list shows its snapshot thumbnail, the stream's status its
latest p_yes. The screenshot is kept in artifacts/ui-test/alerts.png (failure.png when a check failed)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

from tests.test_ui_browser import ARTIFACTS, BROWSER_DIR, CHROMIUM, REPO, AppProcess, browser, free_port

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
    port = free_port()
    app = AppProcess(
        ["--ui", "--model", "tiny", "--stream", f"a={video}", "--no-realtime", "--loop", "--every", "0"]
        + ["--config", str(config), "--budget", "256", "--port", str(port)]
    )
    try:
        app.wait_ready(90)
        result = subprocess.run(
            ["node", str(BROWSER_DIR / "alerts_test.js"), f"http://127.0.0.1:{port}/", str(tmp_path), "person", "a"],
            cwd=BROWSER_DIR,
            env=dict(os.environ, CHROMIUM_PATH=CHROMIUM),
            capture_output=True,
            text=True,
            timeout=150,
        )
    finally:
        code = app.interrupt()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for name in ("alerts.png", "failure.png"):
        (ARTIFACTS / name).unlink(missing_ok=True)
        if (tmp_path / name).exists():
            shutil.copy(tmp_path / name, ARTIFACTS / name)
    report = f"browser stdout:\n{result.stdout}\nbrowser stderr:\n{result.stderr}\napp output:\n{app.output}"
    assert result.returncode == 0, report
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert "person" in seen["banner"] and "Is there a person?" in seen["banner"]
    assert seen["thumbnail"]["naturalWidth"] > 0 and seen["thumbnail"]["src"].startswith("data:image/jpeg")
    assert "Is there a person?" in seen["row"]
    assert code == 0 and "Traceback" not in app.output, app.output
