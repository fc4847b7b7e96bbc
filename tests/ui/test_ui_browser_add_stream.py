"""Adding and removing a stream from the page: the shared one-stream page app (`python -m app --ui --model tiny
--stream a=... --allow-source-net 127.0.0.0/8`, tests/support/ui_browser_apps.py) driven by headless chromium
(tests/ui_browser/add_stream_test.js). Hostile sources (a typed path, a writing gst: pipeline, a listening
tcp://) and a taken name are refused; stream b, a live MPEG-TS served on 127.0.0.1 (allowed by
--allow-source-net 127.0.0.0/8), added through the page gets a panel, the selectors, the plots' lines and an
answer of its own, while a goes on; Remove stream takes it away again. The app's clean exit on Ctrl-C is checked
by its last user (tests/ui/test_ui_browser_watches.py) or at the end of the session.
The screenshot is kept in artifacts/ui-test/add_stream.png (failure.png when a check failed)."""

from __future__ import annotations

from capture.synth import write_video
from tests.support.source_servers import PacedServer
from tests.support.ui_browser_apps import browser, one_stream_app, run_page_script, shared_apps

__all__ = ["browser", "one_stream_app", "shared_apps"]  # fixtures: a missing browser fails (or skips) first


def test_a_stream_added_from_the_page_gets_a_panel_and_answers(one_stream_app, tmp_path):
    app = one_stream_app
    live = tmp_path / "b.ts"
    write_video(
        live, size=(320, 240), fps=5, duration_s=120, container_format="mpegts", options={"preset": "ultrafast"}
    )
    with PacedServer(live, seconds=120) as camera:
        seen = run_page_script(
            "add_stream_test.js", app.url, tmp_path, [camera.url], app.process, ["add_stream.png"], timeout=240
        )
    assert "stream b added; memory: 2 stream(s)" in seen["added"] and "b.ts" in seen["statusB"]
    assert "stream b · round" in seen["answer"] and "stream b removed" in seen["removed"]
    assert "Traceback" not in app.output, app.output
