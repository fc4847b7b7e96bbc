"""The day as strips (timeline.day) from the hand-made timeline of tests/timeline/test_timeline_summary.py, on SQLite
and PostgreSQL alike (the `timeline_location` fixture): every segment's span, moment and text checked by hand."""

from __future__ import annotations

import re
import time

import pytest

from tests.timeline.test_timeline_summary import NOW, ROWS, T0
from timeline import TimelineConfig, TimelineReader
from timeline.day import Segment, bounded, ticks
from timeline.period import Period
from timeline.store import TimelineStore


@pytest.fixture
def reader(timeline_location):
    store = TimelineStore(TimelineConfig(timeline_location))
    store.write(ROWS, now=NOW)
    store.db.close()
    with TimelineReader(timeline_location) as reader:
        yield reader


def spans(strip) -> list[tuple]:
    return [(s.kind, s.start - T0, s.end - T0, s.count, s.open) for s in strip.segments]


def test_a_stream_strip_holds_its_answer_runs_and_gaps_and_a_watch_strip_its_on_intervals(reader):
    result = reader.day(Period(T0, NOW))
    assert [strip.label for strip in result.strips] == ["cam", "cam / car", "cam / door", "yard"]
    cam, car, door, yard = result.strips
    # standing answers at 10, 20, 30 (red), 40, 60 (blue; the person's at 50 is not one), 70 (red again)
    assert spans(cam) == [
        ("answer", 10, 40, 3, False),
        ("answer", 40, 70, 2, False),
        ("answer", 70, 70, 1, False),
        ("gap", 200, 230, 1, False),
    ]
    assert cam.segments[0].text == "A red ball on a blue floor." and cam.segments[1].text == "a blue square on grass"
    assert reader.thumbnail(cam.segments[1].thumbnail) == b"\xff\xd8jpeg" and cam.segments[0].thumbnail is None
    assert cam.segments[3].text == "stream down (reconnect)" and cam.segments[3].moment is None
    # door: a0 (-50..50) cut at the period's start, a1, a2, and a3 still on at the end
    assert spans(door) == [("on", 0, 50, 1, False), ("on", 100, 160, 1, False), ("on", 300, 310, 1, False),
                           ("on", 500, 600, 1, True)]  # fmt: skip
    assert spans(car) == [("on", 320, 330, 1, False)] and car.segments[0].text == "car on: Is there a car?"
    assert spans(yard) == [("answer", 15, 15, 1, False), ("gap", 550, 600, 1, True)]
    assert all(strip.merged == 0 for strip in result.strips)
    # each segment cites its moment: the run's first answer, the alert's begin
    moments = {m.id: m for m in reader.search(limit=100)}
    assert moments[cam.segments[1].moment].t_wall == T0 + 40 and moments[cam.segments[1].moment].kind == "answer"
    begin = moments[door.segments[1].moment]
    assert (begin.kind, begin.state, begin.t_wall) == ("alert", "begin", T0 + 100)


def test_one_stream_and_a_cut_period(reader):
    result = reader.day(Period(T0 + 130, T0 + 305), stream="cam")
    assert [strip.label for strip in result.strips] == ["cam", "cam / door"]
    cam, door = result.strips
    assert spans(cam) == [("gap", 200, 230, 1, False)]  # no answer in the period
    assert spans(door) == [("on", 130, 160, 1, False), ("on", 300, 305, 1, False)]
    assert reader.day(Period(T0 - 9000, T0 - 8000)).strips == []


def test_a_strip_past_its_bound_merges_the_shortest_neighbours_and_counts_them():
    segments = [Segment("on", a, b, f"s{a}", moment=a) for a, b in [(0, 10), (12, 20), (100, 110), (111, 200)]]
    kept, merged = bounded(segments, 2)
    # unions: 0..20 (20 s), 12..110 (98 s), 100..200 (100 s): the first two boundaries go
    assert merged == 2 and [(s.start, s.end, s.count, s.moment) for s in kept] == [(0, 110, 3, 0), (111, 200, 1, 111)]
    assert bounded(segments, 4) == (segments, 0)
    many = [Segment("on", float(i), i + 0.5, "x") for i in range(2000)]
    kept, merged = bounded(many, 500)
    assert len(kept) == 500 and merged == 1500 and sum(s.count for s in kept) == 2000
    assert kept[0].start == 0.0 and kept[-1].end == 1999.5


def test_day_refuses_a_bound_too_small(reader):
    with pytest.raises(ValueError, match="max_segments"):
        reader.day(Period(T0, NOW), max_segments=2)


def test_ticks_fall_on_round_local_times():
    marks = ticks(T0, T0 + 600)  # ten minutes: a tick a minute
    assert len(marks) in (10, 11) and all(T0 <= t <= T0 + 600 for t, _ in marks)
    assert all(time.localtime(t).tm_sec == 0 for t, _ in marks)
    assert all(label == time.strftime("%H:%M", time.localtime(t)) for t, label in marks)
    day = ticks(T0, T0 + 86400)  # a day: every 3 hours, on the local hour
    assert 8 <= len(day) <= 9 and all(time.localtime(t).tm_min == 0 and time.localtime(t).tm_hour % 3 == 0
                                      for t, _ in day)  # fmt: skip
    week = ticks(T0, T0 + 7 * 86400)
    assert all(re.fullmatch(r"\d\d-\d\d", label) for _, label in week) and len(week) in (7, 8)
