"""Adding a stream from the page: `python -m app --ui --model tiny --stream a=...` driven by headless chromium
(tests/ui_browser/add_stream_test.js). A missing file and a taken name are refused; stream b added through the
page gets a panel, the selectors, the plots' lines and an answer of its own, while a goes on.
The screenshot is kept in artifacts/ui-test/add_stream.png (failure.png when a check failed)."""

from __future__ import annotations

from tests.test_ui_browser import browser, drive_app
from tests.test_ui_browser_streams import two_videos

__all__ = ["browser", "two_videos"]  # fixtures: a missing browser fails (or skips) before the app starts


def test_a_stream_added_from_the_page_gets_a_panel_and_answers(browser, two_videos, tmp_path):
    a, b = two_videos
    seen, app, code = drive_app(
        ["--ui", "--model", "tiny", "--stream", f"a={a}", "--no-realtime", "--loop"]
        + ["--every", "0", "--budget", "256", "--max-new-tokens", "8"],
        "add_stream_test.js",
        tmp_path,
        [str(b)],
        ["add_stream.png"],
        timeout=240,
    )
    assert "stream b added; memory: 2 stream(s)" in seen["added"] and "b.mp4" in seen["statusB"]
    assert "stream b · round" in seen["answer"]
    assert code == 0 and "Traceback" not in app.output, app.output
