"""The History tab's Day view, pure (no browser): the strips as HTML (segments placed by percent of the period,
every text escaped, nothing fetched), what a click on a segment shows (its thumbnail inline, its text), the
messages instead of strips; and once over a real timeline through the page's source (app.front_door)."""

from __future__ import annotations

import re
import time

import pytest

from app.front_door import TimelineHistory
from tests.ui.test_ui_history import JPEG
from timeline import TimelineConfig
from timeline.day import Day, Segment, Strip, ticks
from timeline.period import PeriodError
from timeline.store import Row, TimelineStore
from ui import day, history
from ui.history import HistoryUnavailable

T0 = 1_780_000_000.0
HOSTILE = "<img src=http://evil.example/x.png> <script>alert(1)</script>"


def sample() -> Day:
    cam = Strip("cam", None, [
        Segment("answer", T0 + 0, T0 + 250, "a red ball", moment=11, count=3),
        Segment("answer", T0 + 250, T0 + 500, HOSTILE, moment=14, thumbnail=15, count=2),
        Segment("gap", T0 + 600, T0 + 700, "stream down (reconnect)"),
    ])  # fmt: skip
    door = Strip("cam", "door", [Segment("on", T0 + 100, T0 + 1000, "door on", moment=21, thumbnail=21, open=True)], 7)
    return Day(T0, T0 + 1000, [cam, door], ticks(T0, T0 + 1000))


class FakeSource:
    def __init__(self, result=None, error: Exception | None = None) -> None:
        self.result, self.error, self.calls, self.thumbs = result, error, [], []

    def day_back(self, seconds, stream=None):
        self.calls.append((seconds, stream))
        if self.error is not None:
            raise self.error
        return self.result

    def thumbnails(self, row_ids):
        self.thumbs.append(list(row_ids))
        return {row_id: JPEG for row_id in row_ids if row_id == 15}


def segments(page: str) -> list[tuple[str, float, float]]:
    return [
        (key, float(left), float(width))
        for key, left, width in re.findall(r'data-seg="(\d+:\d+)"[^>]*left:([\d.]+)%;width:([\d.]+)%', page)
    ]


def test_the_strips_place_each_segment_by_percent_of_the_period_and_escape_every_text():
    page = day.strips_html(sample())
    assert segments(page) == [("0:0", 0.0, 25.0), ("0:1", 25.0, 25.0), ("0:2", 60.0, 10.0), ("1:0", 10.0, 90.0)]
    assert page.count('class="day-row"') == 2 and "cam / door (+7 merged)" in page
    assert "day-answer-0" in page and "day-answer-1" in page and "day-gap" in page and "day-on" in page
    assert "<script" not in page and "<img" not in page and "&lt;script&gt;" in page  # the hostile answer, escaped
    assert "http" not in re.sub(r"&lt;img src=http://evil\.example/x\.png&gt;", "", page)  # nothing to fetch
    labels = re.findall(r'class="day-tick"[^>]*>([^<]+)<', page)
    assert labels and labels == [label for _, label in ticks(T0, T0 + 1000)]
    assert history.local_time(T0) in page


def test_a_click_shows_the_segments_thumbnail_inline_and_its_text():
    source, result = FakeSource(), sample()
    shown = day.moment_html(source, result, "0:1")
    assert source.thumbs == [[15]] and 'src="data:image/jpeg;base64,' in shown
    assert "&lt;script&gt;" in shown and "<script" not in shown and "(2 answers) (moment 14)" in shown
    assert 'data-moment="14"' in shown
    open_alert = day.moment_html(source, result, "1:0")
    assert "<img" not in open_alert and "watch on" in open_alert and "still so" in open_alert
    gap = day.moment_html(source, result, "0:2")
    assert "stream down" in gap and 'data-moment=""' in gap
    for nonsense in (None, "", "9:0", "0:9", "0:1; alert(1)", "-1:0", "1" * 50):
        assert day.moment_html(source, result, nonsense) == day.DETAIL_PROMPT
    assert day.moment_html(source, None, "0:0") == day.DETAIL_PROMPT
    unreadable = day.moment_html(FakeSource(error=None), result, "0:0")  # no thumbnail: nothing read
    assert "a red ball" in unreadable


def test_a_thumbnail_that_cannot_be_read_says_so():
    class Locked(FakeSource):
        def thumbnails(self, row_ids):
            raise HistoryUnavailable("database is locked")

    shown = day.moment_html(Locked(), sample(), "0:1")
    assert "cannot read its thumbnail: database is locked" in shown and "<img" not in shown


def test_drawing_asks_the_source_for_the_period_and_stream_and_never_raises():
    source = FakeSource(sample())
    page, result = day.day_view(source, "last 6 h", "cam")
    assert source.calls == [(6 * 3600.0, "cam")] and result is source.result and "day-row" in page
    day.day_view(source, "last 1 day", history.ALL)
    assert source.calls[-1] == (86400.0, None)
    for error, words in [
        (HistoryUnavailable("database is locked"), "cannot draw the day: database is locked"),
        (PeriodError("the timeline keeps 1 days"), "cannot draw the day: the timeline keeps 1 days"),
        (RuntimeError("boom"), "drawing the day failed: RuntimeError: boom"),
    ]:
        page, result = day.day_view(FakeSource(error=error), "last 1 h", None)
        assert words in page and result is None
    assert "timeline is off" in day.day_view(None, "last 1 h", None)[0]
    assert "unknown period" in day.day_view(source, "last year", None)[0]
    empty = day.strips_html(Day(T0, T0 + 60, [], []))
    assert "Nothing in this period" in empty


def test_too_many_strips_are_cut_with_a_note():
    many = Day(T0, T0 + 60, [Strip(f"s{i}", None, []) for i in range(day.MAX_STRIPS + 3)], [])
    page = day.strips_html(many)
    assert page.count('class="day-row"') == day.MAX_STRIPS and "3 more strip(s) not drawn" in page
    assert day.segment_at(many, f"{day.MAX_STRIPS}:0") is None


@pytest.fixture
def timeline_file(tmp_path):
    path = tmp_path / "timeline.sqlite"
    now = time.time()
    rows = [
        Row(kind="answer", t_wall=now - 300 + t, stream="cam", start_s=t, end_s=t, question="What is there?",
            text=text, who="standing", round=1, thumbnail=JPEG if t == 20 else None)
        for t, text in [(10, "a cat"), (20, "a dog"), (30, "a dog")]
    ] + [
        Row(kind="alert", t_wall=now - 200, stream="cam", start_s=1, end_s=1, question="Is there a dog?",
            text="dog began", who="watch", alert="dog", alert_id="d1", state="begin", thumbnail=JPEG),
    ]  # fmt: skip
    store = TimelineStore(TimelineConfig(path))
    store.write(rows)
    store.close()
    return path


def test_the_pages_source_draws_a_real_timeline_and_a_click_shows_its_thumbnail(timeline_file):
    source = TimelineHistory(timeline_file, keep_days=1.0)
    page, result = day.day_view(source, "last 1 h", None)
    assert [strip.label for strip in result.strips] == ["cam", "cam / dog"]
    assert [key for key, _, _ in segments(page)] == ["0:0", "0:1", "1:0"]
    shown = day.moment_html(source, result, "0:1")  # the run of two dogs: its first answer has the thumbnail
    assert "a dog" in shown and "(2 answers)" in shown and 'src="data:image/jpeg;base64,' in shown
    assert 'src="data:image/jpeg;base64,' in day.moment_html(source, result, "1:0")  # the alert's snapshot
    assert "cannot draw the day" in day.day_view(source, "last 7 days", None)[0]  # the timeline keeps 1 day


def test_control_characters_are_not_shown():
    result = Day(T0, T0 + 60, [Strip("cam", None, [Segment("answer", T0, T0 + 60, "a\x00b\x07c", moment=1)])], [])
    page, shown = day.strips_html(result), day.moment_html(FakeSource(), result, "0:0")
    assert "\x00" not in page + shown and "\x07" not in page + shown and "abc" in page and "abc" in shown
