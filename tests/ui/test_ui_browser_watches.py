"""The page's "Watch for" section in headless chromium (tests/ui_browser/watches_test.js), on
`python -m app --ui --model tiny --video ...`: a refused interval, a watch added (listed, set by page, checked by the
model: its p_yes in the stream's status) and ended (gone from the list and from the runtime watches' file). The
screenshot is kept in artifacts/ui-test/watches.png (failure.png when a check failed)."""

from __future__ import annotations

import json

from tests.support.app_helpers import video
from tests.ui.test_ui_browser import browser, drive_app
from watches.runtime import state_path

__all__ = ["browser"]  # the fixture: a missing browser fails (or skips) before the app starts


def test_a_watch_is_added_listed_checked_and_ended_from_the_page(browser, tmp_path):
    timeline = tmp_path / "data" / "timeline.sqlite"
    seen, app, code = drive_app(
        ["--ui", "--model", "tiny", "--video", str(video(60)), "--loop", "--every", "0", "--budget", "256"]
        + ["--timeline", str(timeline)],
        "watches_test.js",
        tmp_path,
        [],
        ["watches.png"],
    )
    assert "every must be 1 to 86400 seconds" in seen["refused"]
    assert "set by page" in seen["added"] and "page" in seen["row"]
    assert "watches: door-person" in seen["status"]
    assert seen["ended"] == "watch door-person ended" and "No watches yet" in seen["listAfter"]
    assert json.loads(state_path(timeline.parent).read_text())["watches"] == []  # ended: not kept for the next run
    assert code == 0 and "Traceback" not in app.output, app.output
