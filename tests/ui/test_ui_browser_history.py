"""The History tab in a real browser: `python -m app --ui --model tiny --stream a=VIDEO --no-realtime --every 4
--timeline FILE`, driven by headless chromium (tests/ui_browser/history_test.js): an answer appears in the chat;
searching a word of it in the History tab shows a row with that word and a thumbnail from the timeline; a word
nobody said finds nothing. The screenshot is kept in artifacts/ui-test/history.png (failure.png when a check
failed); then the timeline file holds what the page found."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.ui.test_ui_browser import ARTIFACTS, REPO, browser, drive_app
from timeline import TimelineReader

__all__ = ["browser"]  # the fixture: a missing browser fails (or skips) before the app starts


def test_searching_a_word_of_an_answer_shows_its_row_with_a_thumbnail(browser, tmp_path):
    video = tmp_path / "a.mp4"
    subprocess.run(
        [sys.executable, "scripts/make_demo_video.py", "--duration", "12", "--size", "320x240", "--fps", "10"]
        + ["--scene-seconds", "4", "--out", str(video)],
        cwd=REPO,
        check=True,
        capture_output=True,
    )
    timeline = tmp_path / "timeline.sqlite"
    seen, app, code = drive_app(
        ["--ui", "--model", "tiny", "--stream", f"a={video}", "--no-realtime", "--loop", "--every", "4"]
        + ["--timeline", str(timeline), "--budget", "256", "--max-new-tokens", "16"],
        "history_test.js",
        tmp_path,
        [],
        ["history.png", "history-chat.png"],
    )
    (ARTIFACTS / "history.json").write_text(json.dumps(seen, indent=1))
    assert seen["word"].lower() in seen["row"].lower() and "a" in seen["row"].split()
    shown = [e for e in seen["evidence"] if e["thumbs"]]  # answers with "seen at" and thumbnails of their clips
    assert shown and all(0 < w <= 96 for e in shown for w in e["thumbs"]), seen["evidence"]
    assert seen["thumbnail"]["naturalWidth"] > 0 and seen["thumbnail"]["src"].startswith("data:image/jpeg")
    with TimelineReader(timeline) as reader:
        found = reader.search(seen["word"], stream="a")
    assert found and found[0].has_thumbnail and seen["word"].lower() in (found[0].text or "").lower()
    assert code == 0 and "Traceback" not in app.output, app.output
