"""The page's "Watch for" section in headless chromium (tests/ui_browser/watches_test.js), on the shared one-stream
page app (`python -m app --ui --model tiny --stream a=... --timeline FILE`, tests/support/ui_browser_apps.py): a
refused interval, a watch added (listed, set by page, checked by the model: its p_yes in the stream's status) and
ended (gone from the list and from the runtime watches' file). The screenshot is kept in
artifacts/ui-test/watches.png (failure.png when a check failed).

This module runs last of those that use the one-stream app, so it ends with Ctrl-C to it: the app stops cleanly
(exit 0, no traceback, after serving everything the tests before asked of it); a later test gets a fresh
one."""

from __future__ import annotations

import json
import urllib.request

from tests.support.ui_browser_apps import browser, one_stream_app, run_page_script, shared_apps
from watches.runtime import state_path

__all__ = ["browser", "one_stream_app", "shared_apps"]  # fixtures: a missing browser fails (or skips) first


def test_a_watch_is_added_listed_checked_and_ended_from_the_page(one_stream_app, tmp_path):
    app = one_stream_app
    seen = run_page_script("watches_test.js", app.url, tmp_path, [], app.process, ["watches.png"])
    assert "every must be 1 to 86400 seconds" in seen["refused"]
    assert "set by page" in seen["added"] and "page" in seen["row"]
    assert "watches: door-person" in seen["status"]
    assert seen["ended"] == "watch door-person ended" and "No watches yet" in seen["listAfter"]
    assert json.loads(state_path(app.timeline.parent).read_text())["watches"] == []  # ended: not kept for next run
    assert "Traceback" not in app.output, app.output


def test_ctrl_c_stops_the_page_cleanly(one_stream_app):
    app = one_stream_app
    with urllib.request.urlopen(app.url, timeout=10) as response:
        assert response.status == 200
    assert app.interrupt() == 0, app.output
    assert "stopping" in app.output and "Traceback" not in app.output
