"""Adding a stream from the page: `python -m app --ui --model tiny --stream a=...` driven by headless chromium
(tests/ui_browser/add_stream_test.js). A missing file and a taken name are refused; stream b added through the
page gets a panel, the selectors, the plots' lines and an answer of its own, while a goes on.
The screenshot is kept in artifacts/ui-test/add_stream.png (failure.png when a check failed)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

from tests.test_ui_browser import ARTIFACTS, BROWSER_DIR, CHROMIUM, AppProcess, browser, free_port
from tests.test_ui_browser_streams import two_videos

__all__ = ["browser", "two_videos"]  # fixtures: a missing browser fails (or skips) before the app starts


def test_a_stream_added_from_the_page_gets_a_panel_and_answers(browser, two_videos, tmp_path):
    port = free_port()
    a, b = two_videos
    app = AppProcess(
        ["--ui", "--model", "tiny", "--stream", f"a={a}", "--no-realtime", "--loop"]
        + ["--every", "0", "--budget", "256", "--max-new-tokens", "8", "--port", str(port)]
    )
    try:
        app.wait_ready(90)
        result = subprocess.run(
            ["node", str(BROWSER_DIR / "add_stream_test.js"), f"http://127.0.0.1:{port}/", str(tmp_path), str(b)],
            cwd=BROWSER_DIR,
            env=dict(os.environ, CHROMIUM_PATH=CHROMIUM),
            capture_output=True,
            text=True,
            timeout=240,
        )
    finally:
        code = app.interrupt()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for name in ("add_stream.png", "failure.png"):
        (ARTIFACTS / name).unlink(missing_ok=True)
        if (tmp_path / name).exists():
            shutil.copy(tmp_path / name, ARTIFACTS / name)
    report = f"browser stdout:\n{result.stdout}\nbrowser stderr:\n{result.stderr}\napp output:\n{app.output}"
    assert result.returncode == 0, report
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert "stream b added; memory: 2 stream(s)" in seen["added"] and "b.mp4" in seen["statusB"]
    assert "stream b · round" in seen["answer"]
    assert code == 0 and "Traceback" not in app.output, app.output
