"""The History tab's Recap view, pure (no browser): a recap's lines as HTML (time span, stream, count, the moments
cited, thumbnails inline, every text escaped, the model's paragraph marked as its own), the messages instead of a
recap; and once over a real timeline through the page's source (app.front_door). The real browser:
tests/ui/test_ui_browser_day.py."""

from __future__ import annotations

import re

from app.front_door import TimelineHistory
from tests.ui.test_ui_day import HOSTILE, T0, timeline_file
from tests.ui.test_ui_history import JPEG
from timeline.period import PeriodError
from timeline.recap import Recap, RecapLine
from timeline.summary import StreamSummary, Summary, WatchSummary
from ui import history, recap
from ui.history import HistoryUnavailable

__all__ = ["timeline_file"]  # the fixture: a real SQLite timeline of three answers and an alert


def sample(summary: str | None = None) -> Recap:
    lines = [
        RecapLine("answers", "cam", T0, T0 + 250, "a red ball", count=3, moments=[11, 14], thumbnail=11),
        RecapLine("alert", "cam", T0 + 100, None, "door: on since it began", watch="door", moments=[21], thumbnail=21),
        RecapLine("asked", "cam", T0 + 300, T0 + 300, HOSTILE, question="What <b>is</b> it?", moments=[30]),
        RecapLine("gap", "cam", T0 + 600, T0 + 700, "stream down (reconnect)"),
    ]
    return Recap(T0, T0 + 1000, lines, 2, "From here to there: 1 alert(s), 4 answer(s), 1 gap(s).", summary)


def counts() -> Summary:
    door = WatchSummary("cam", "<door>", 2, 3725.0, 3600.0, T0 + 100, T0 + 900, True)
    return Summary(T0, T0 + 1000, None, [StreamSummary("cam", 4, 2, 100.0)], [door])


class FakeSource:
    def __init__(self, result=None, error: Exception | None = None) -> None:
        self.result, self.error, self.calls, self.thumbs = result, error, [], []

    def summary_back(self, seconds, stream=None):
        self.calls.append(("summary", seconds, stream))
        return counts()

    def recap_back(self, seconds, stream=None):
        self.calls.append((seconds, stream))
        if self.error is not None:
            raise self.error
        return self.result

    def thumbnails(self, row_ids):
        self.thumbs.append(list(row_ids))
        return {row_id: JPEG for row_id in row_ids if row_id == 21}


def shown_lines(page: str) -> list[tuple[str, str]]:
    return re.findall(r'<li class="recap-line [^"]*" data-kind="([^"]+)" data-moments="([^"]*)"', page)


def test_each_line_shows_its_span_stream_count_and_moments_in_order_and_every_text_is_escaped():
    source = FakeSource(sample())
    page = recap.recap_view(source, "last 6 h", "cam")
    assert source.calls == [(6 * 3600.0, "cam"), ("summary", 6 * 3600.0, "cam")] and source.thumbs == [[11, 21]]
    assert shown_lines(page) == [("answers", "11,14"), ("alert", "21"), ("asked", "30"), ("gap", "")]
    assert "(x3)" in page and page.count("(x") == 1  # only the run counts its answers
    assert f"{history.local_time(T0)} - " in page and "still so" in page
    assert page.count('src="data:image/jpeg;base64,') == 1 and 'alt="moment 21"' in page  # 11 had no JPEG
    assert "<script" not in page and "<b>is</b>" not in page and "&lt;script&gt;" in page
    assert "<i>What &lt;b&gt;is&lt;/b&gt; it?</i>" in page  # the person's question, before its answer
    assert "http" not in re.sub(r"&lt;img src=http://evil\.example/x\.png&gt;", "", page)  # nothing to fetch
    assert "1 alert(s), 4 answer(s)" in page and "Written by the model" not in page


def test_the_counts_come_first_a_row_per_watch_then_per_stream():
    page = recap.recap_view(FakeSource(sample()), "last 1 day", history.ALL)
    assert page.index('class="recap-counts"') < page.index('class="recap-view"')
    rows = re.findall(r"<tr data-(watch|stream)=\"([^\"]*)\">(.*?)</tr>", page)
    assert [(kind, name) for kind, name, _ in rows] == [("watch", "&lt;door&gt;"), ("stream", "cam")]
    assert "began 2 time(s)" in rows[0][2] and "on 01:02:05 (longest 01:00:00)" in rows[0][2] and "on now" in rows[0][2]
    assert "4 answer(s)" in rows[1][2] and "2 alert(s) begun" in rows[1][2] and "down 00:01:40" in rows[1][2]
    assert recap.counts_html(Summary(T0, T0 + 1, None, [], [])) == ""


def test_the_models_paragraph_is_marked_as_its_own_and_comes_beside_the_lines_not_instead():
    page = recap.recap_html(sample("Mostly a <red> ball."), {})
    assert "Written by the model from these lines:" in page and "&lt;red&gt;" in page
    assert len(shown_lines(page)) == 4


def test_an_empty_period_says_so_and_a_failing_source_gives_a_message_never_an_exception():
    empty = Recap(T0, T0 + 60, [], 0, "Nothing in the timeline from then to now: no alert, no answer, no gap.")
    page = recap.recap_view(FakeSource(empty), "last 1 h", history.ALL)
    assert "Nothing in the timeline" in page and "recap-line" not in page
    for error, words in [
        (HistoryUnavailable("database is locked"), "cannot recap the period: database is locked"),
        (PeriodError("the timeline keeps 1 days"), "cannot recap the period: the timeline keeps 1 days"),
        (RuntimeError("boom"), "the recap failed: RuntimeError: boom"),
    ]:
        assert words in recap.recap_view(FakeSource(error=error), "last 1 h", None)
    assert "timeline is off" in recap.recap_view(None, "last 1 h", None)
    assert "unknown period" in recap.recap_view(FakeSource(sample()), "forever", None)


def test_a_time_span_gives_the_end_day_only_when_it_is_another_day():
    assert recap.when(T0, T0) == history.local_time(T0)
    assert recap.when(T0, T0 + 60) == f"{history.local_time(T0)} - {history.local_time(T0 + 60)[11:]}"
    assert recap.when(T0, T0 + 3 * 86400) == f"{history.local_time(T0)} - {history.local_time(T0 + 3 * 86400)}"


def test_the_pages_source_recaps_a_real_timeline_with_runs_and_thumbnails(timeline_file):
    source = TimelineHistory(timeline_file, keep_days=1.0)
    page = recap.recap_view(source, "last 1 h", None)
    kinds = [kind for kind, _ in shown_lines(page)]
    assert kinds == ["answers", "answers", "alert"], page  # a cat, then the run of two dogs, then the alert
    assert "a dog" in page and "(x2)" in page and page.count('src="data:image/jpeg;base64,') == 2
    assert re.search(r'<tr data-watch="dog">.*?began 1 time\(s\).*?on now', page)  # begun, never ended
    assert re.search(r'<tr data-stream="cam">.*?3 answer\(s\).*?1 alert\(s\) begun', page)
    assert "cannot recap the period" in recap.recap_view(source, "last 7 days", None)  # the timeline keeps 1 day
