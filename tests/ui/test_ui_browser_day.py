"""The History tab's Day view in a real browser: the shared one-stream page app (`python -m app --ui --model tiny
--stream a=VIDEO --every 4 --timeline FILE`, tests/support/ui_browser_apps.py; the one the History test uses),
driven by headless chromium (tests/ui_browser/day_test.js): Draw shows stream a's strip with its answer runs; a
mouse click on one shows that moment's thumbnail (inline JPEG) and its answer's text, which the timeline holds; the
Recap view of the same page lists the period's runs of answers, each citing moments of stream a whose text it shows.
The screenshots are kept in artifacts/ui-test/day.png and recap.png (failure.png when a check failed). The app's
clean exit on Ctrl-C is checked by its last user (tests/ui/test_ui_browser_watches.py) or at the end of the session."""

from __future__ import annotations

import json

from tests.support.ui_browser_apps import ARTIFACTS, browser, one_stream_app, run_page_script, shared_apps
from timeline import TimelineReader

__all__ = ["browser", "one_stream_app", "shared_apps"]  # fixtures: a missing browser fails (or skips) first


def printable(text: str) -> str:
    """The tiny model's gibberish without the control characters and white space a browser's innerText, a title and
    the server's escaping differ on (a control character becomes a space in one, nothing in another)."""
    return "".join(c for c in text if c.isprintable() and not c.isspace())


def test_the_day_view_draws_the_streams_strip_and_a_click_shows_its_moment(one_stream_app, tmp_path):
    app = one_stream_app
    seen = run_page_script("day_test.js", app.url, tmp_path, [], app.process, ["day.png", "recap.png"])
    (ARTIFACTS / "day.json").write_text(json.dumps(seen, indent=1))
    assert "a" in seen["labels"], seen["labels"]  # (and b, after the add-stream test)
    clicked, detail = seen["clicked"], seen["detail"]
    assert clicked["kind"] == "answer" and detail["text"], seen
    assert printable(clicked["title"]).endswith(printable(detail["text"])), seen
    assert detail["image"]["naturalWidth"] > 0 and detail["image"]["src"].startswith("data:image/jpeg")
    with TimelineReader(app.timeline) as reader:
        [moment] = [m for m in reader.search(limit=1000) if m.id == int(detail["moment"])]
    assert moment.kind == "answer" and printable(moment.text or "") == printable(detail["text"])
    runs = [line for line in seen["recap"]["lines"] if line["kind"] == "answers"]
    assert runs and "answer(s)" in seen["recap"]["head"], seen["recap"]
    with TimelineReader(app.timeline) as reader:
        by_id = {m.id: m for m in reader.search(limit=1000)}
    for run in runs:  # each run cites its first and last answer; it shows the last one's words
        cited = [by_id[int(moment)] for moment in run["moments"].split(",")]
        assert all(m.kind == "answer" and m.stream == run["stream"] for m in cited), (run, cited)
        assert printable(cited[-1].text or "") == printable(run["text"]), (run, cited)
    assert "Traceback" not in app.output, app.output
