"""Adding and removing a stream from the page: `python -m app --ui --model tiny --stream a=...` driven by headless
chromium (tests/ui_browser/add_stream_test.js). Hostile sources (a typed path, a writing gst: pipeline, a listening
tcp://) and a taken name are refused; stream b, a live MPEG-TS served on 127.0.0.1 (allowed by
--allow-source-net 127.0.0.0/8), added through the page gets a panel, the selectors, the plots' lines and an
answer of its own, while a goes on; Remove stream takes it away again.
The screenshot is kept in artifacts/ui-test/add_stream.png (failure.png when a check failed)."""

from __future__ import annotations

from capture.synth import write_video
from tests.support.source_servers import PacedServer
from tests.ui.test_ui_browser import browser, drive_app
from tests.ui.test_ui_browser_streams import two_videos

__all__ = ["browser", "two_videos"]  # fixtures: a missing browser fails (or skips) before the app starts


def test_a_stream_added_from_the_page_gets_a_panel_and_answers(browser, two_videos, tmp_path):
    a, _ = two_videos
    live = tmp_path / "b.ts"
    write_video(
        live, size=(320, 240), fps=10, duration_s=120, container_format="mpegts", options={"preset": "ultrafast"}
    )
    with PacedServer(live, seconds=120) as camera:
        seen, app, code = drive_app(
            ["--ui", "--model", "tiny", "--stream", f"a={a}", "--no-realtime", "--loop"]
            + ["--every", "0", "--budget", "256", "--max-new-tokens", "8", "--allow-source-net", "127.0.0.0/8"],
            "add_stream_test.js",
            tmp_path,
            [camera.url],
            ["add_stream.png"],
            timeout=240,
        )
    assert "stream b added; memory: 2 stream(s)" in seen["added"] and "b.ts" in seen["statusB"]
    assert "stream b · round" in seen["answer"] and "stream b removed" in seen["removed"]
    assert code == 0 and "Traceback" not in app.output, app.output
