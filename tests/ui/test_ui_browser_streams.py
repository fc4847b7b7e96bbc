"""The web page watching two streams in one process: the shared two-streams page app (`python -m app --ui --model
tiny --stream a=... --stream b=...`, tests/support/ui_browser_apps.py) driven by headless chromium
(tests/ui_browser/streams_test.js). Each stream has its panel (frame, status), a question sent to one stream is
answered by that stream only, and the memory plot has a line per stream. The screenshot is kept in
artifacts/ui-test/streams.png (failure.png when a check failed).

This module runs last of those that use the two-streams app, so it ends with Ctrl-C to it: the app stops cleanly
(exit 0, no traceback); a later test gets a fresh one."""

from __future__ import annotations

from tests.support.ui_browser_apps import browser, run_page_script, shared_apps, two_streams_app

__all__ = ["browser", "shared_apps", "two_streams_app"]  # fixtures: a missing browser fails (or skips) first


def test_two_streams_each_have_a_panel_and_a_question_to_one_is_answered_by_it_only(two_streams_app, tmp_path):
    app = two_streams_app
    seen = run_page_script("streams_test.js", app.url, tmp_path, [], app.process, ["streams.png"])
    assert "a.mp4" in seen["status_a"] and "b.mp4" in seen["status_b"]
    assert len(seen["askedTurns"]) == 1 and "stream b" in seen["answer"]
    assert "Traceback" not in app.output, app.output


def test_ctrl_c_stops_the_two_stream_page_cleanly(two_streams_app):
    app = two_streams_app
    assert app.interrupt() == 0, app.output
    assert "stopping" in app.output and "Traceback" not in app.output
