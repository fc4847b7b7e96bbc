"""The History tab in a real browser: the shared one-stream page app (`python -m app --ui --model tiny --stream
a=VIDEO --every 4 --timeline FILE`, tests/support/ui_browser_apps.py), driven by headless chromium
(tests/ui_browser/history_test.js): an answer appears in the chat; searching a word of it in the History tab
shows a row with that word and a thumbnail from the timeline; a word nobody said finds nothing. The screenshot is
kept in artifacts/ui-test/history.png (failure.png when a check failed); then the timeline file holds what the
page found. The app's clean exit on Ctrl-C is checked by its last user (tests/ui/test_ui_browser_watches.py) or at
the end of the session."""

from __future__ import annotations

import json

from tests.support.ui_browser_apps import ARTIFACTS, browser, one_stream_app, run_page_script, shared_apps
from timeline import TimelineReader

__all__ = ["browser", "one_stream_app", "shared_apps"]  # fixtures: a missing browser fails (or skips) first


def test_searching_a_word_of_an_answer_shows_its_row_with_a_thumbnail(one_stream_app, tmp_path):
    app = one_stream_app
    seen = run_page_script("history_test.js", app.url, tmp_path, [], app.process, ["history.png", "history-chat.png"])
    (ARTIFACTS / "history.json").write_text(json.dumps(seen, indent=1))
    assert seen["word"].lower() in seen["row"].lower() and "a" in seen["row"].split()
    shown = [e for e in seen["evidence"] if e["thumbs"]]  # answers with "seen at" and thumbnails of their clips
    assert shown and all(0 < w <= 96 for e in shown for w in e["thumbs"]), seen["evidence"]
    assert seen["thumbnail"]["naturalWidth"] > 0 and seen["thumbnail"]["src"].startswith("data:image/jpeg")
    with TimelineReader(app.timeline) as reader:
        found = reader.search(seen["word"], stream="a")
    assert found and found[0].has_thumbnail and seen["word"].lower() in (found[0].text or "").lower()
    assert "Traceback" not in app.output, app.output
