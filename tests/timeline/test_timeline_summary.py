"""Counts, durations and recaps of a period from a hand-made timeline whose answers are known (written below as
arithmetic on the rows), on SQLite and PostgreSQL alike (the `timeline_location` fixture)."""

from __future__ import annotations

import time

import pytest

from timeline import TimelineConfig, TimelineReader
from timeline.period import DAY_S, Period, PeriodError, period
from timeline.recap import recap_text, same_words
from timeline.store import Row, TimelineStore

T0 = 1_780_000_000.0  # a fixed wall time; every row below is T0 + seconds
NOW = T0 + 600.0


def alert(kind: str, t: float, alert_id: str, name: str = "door", stream: str = "cam", duration=None) -> Row:
    state = "begin" if kind == "begin" else "end"
    text = f"{name} began" if state == "begin" else f"{name} ended after {duration or 0:.0f} s"
    return Row(kind="alert", t_wall=T0 + t, stream=stream, start_s=t, end_s=t, question=f"Is there a {name}?",
               text=text, who="watch", alert=name, alert_id=alert_id, state=state, duration_s=duration)  # fmt: skip


def answer(t: float, text: str, stream: str = "cam", who: str = "standing", thumbnail=None) -> Row:
    return Row(kind="answer", t_wall=T0 + t, stream=stream, start_s=t - 4, end_s=t, question="What is on screen?",
               text=text, who=who, round=1, thumbnail=thumbnail)  # fmt: skip


def stream_row(t: float, state: str, stream: str = "cam") -> Row:
    return Row(kind="stream", t_wall=T0 + t, stream=stream, start_s=t, end_s=t, text=state, state=state)


ROWS = [
    alert("begin", -50, "a0"),  # began before the period: 50 of its 100 s fall inside, no begin counted
    alert("end", 50, "a0", duration=100.0),
    stream_row(0, "start"),
    alert("begin", 100, "a1"),
    alert("end", 160, "a1", duration=60.0),
    stream_row(200, "reconnect"),
    stream_row(230, "reconnected"),
    alert("begin", 300, "a2"),
    alert("end", 310, "a2", duration=10.0),
    alert("begin", 320, "b1", name="car"),
    alert("end", 330, "b1", name="car", duration=10.0),
    alert("begin", 500, "a3"),  # still on at NOW: 100 s up to now
    stream_row(550, "reconnect", stream="yard"),  # still down at NOW
    answer(10, "A red ball on a blue floor."),
    answer(20, "a red  ball on a blue floor"),
    answer(30, "a red ball on a blue floor"),
    answer(40, "a blue square on grass", thumbnail=b"\xff\xd8jpeg"),
    answer(50, "What? Nothing.", who="person"),
    answer(60, "a blue square on grass"),
    answer(70, "a red ball on a blue floor"),
    answer(15, "an empty yard", stream="yard"),
]


@pytest.fixture
def reader(timeline_location):
    store = TimelineStore(TimelineConfig(timeline_location))
    store.write(ROWS, now=NOW)
    store.db.close()
    with TimelineReader(timeline_location) as reader:
        yield reader


def test_a_watch_counts_its_begins_and_its_time_on_inside_the_period(reader):
    summary = reader.summary(Period(T0, NOW))
    door = next(w for w in summary.watches if w.watch == "door")
    assert door.began == 3  # a1, a2, a3 (a0 began before)
    assert door.on_s == pytest.approx(50 + 60 + 10 + 100)
    assert door.longest_s == pytest.approx(100.0)
    assert (door.first, door.last) == (T0 + 100, T0 + 500)
    assert door.on_now
    car = next(w for w in summary.watches if w.watch == "car")
    assert (car.began, car.on_s, car.on_now) == (1, pytest.approx(10.0), False)


def test_a_period_cut_through_an_alert_counts_only_its_share(reader):
    door = reader.summary(Period(T0 + 130, T0 + 305), watch="door").watches[0]
    # a1 (100-160, 60 s) has 30 s inside; a2 (300-310, 10 s) has 5 s inside and began inside
    assert door.began == 1 and door.on_s == pytest.approx(35.0) and door.on_now
    assert reader.summary(Period(T0 + 400, T0 + 450), watch="car").watches == []


@pytest.mark.parametrize("until", [NOW, T0 + 305])  # the second cuts through alert a2
def test_hour_buckets_add_up_to_the_whole_summed_in_sql(reader, until):
    span = Period(T0 - 3 * 3600, until)
    door = reader.summary(span, bucket="hour", watch="door").watches[0]  # alert by alert, in Python
    whole = reader.summary(span, watch="door").watches[0]  # SQL aggregates and the alerts across the edges
    assert door.buckets[0].start == span.since
    assert sum(b.began for b in door.buckets) == door.began == whole.began == (4 if until == NOW else 3)
    assert sum(b.on_s for b in door.buckets) == pytest.approx(door.on_s) == pytest.approx(whole.on_s)
    assert (door.longest_s, door.first, door.last, door.on_now) == (
        pytest.approx(whole.longest_s), whole.first, whole.last, whole.on_now)  # fmt: skip
    starts = [b.start for b in door.buckets]
    assert starts == sorted(starts) and len(door.buckets) in (4, 5)
    assert all(time.localtime(s).tm_min == 0 for s in starts[1:])  # whole local hours after the first


def test_buckets_are_bounded(reader):
    with pytest.raises(PeriodError, match="more than 798 hours"):
        reader.summary(Period(NOW - 40 * DAY_S, NOW), bucket="hour")
    assert len(reader.summary(Period(NOW - 40 * DAY_S, NOW), bucket="day").watches[0].buckets) in (40, 41)


def test_streams_count_answers_and_alerts_and_their_gaps(reader):
    streams = {s.stream: s for s in reader.summary(Period(T0, NOW)).streams}
    cam, yard = streams["cam"], streams["yard"]
    assert (cam.answers, cam.alerts) == (7, 4)
    assert [(g.start - T0, g.end - T0, g.reason) for g in cam.gaps] == [(200, 230, "reconnect")]
    assert cam.down_s == pytest.approx(30.0)
    assert yard.gaps[0].end is None and yard.down_s == pytest.approx(50.0)  # down since 550, up to now
    # a period starting while a stream is down counts the gap from the period's start
    cut = {s.stream: s for s in reader.summary(Period(T0 + 210, NOW)).streams}["cam"]
    assert cut.down_s == pytest.approx(20.0)


def test_the_recap_collapses_equal_answers_into_runs_that_cite_their_moments(reader):
    recap = reader.recap(Period(T0, NOW), stream="cam")
    runs = [line for line in recap.lines if line.kind == "answers"]
    assert [(line.count, line.start - T0, line.end - T0) for line in runs] == [(3, 10, 30), (2, 40, 60), (1, 70, 70)]
    assert runs[0].text == "a red ball on a blue floor" and len(runs[0].moments) == 2
    assert (runs[0].start_s, runs[0].end_s) == (10, 30)  # the stream times of its first and last answer
    assert runs[1].thumbnail is not None and reader.thumbnail(runs[1].thumbnail) == b"\xff\xd8jpeg"
    asked = [line for line in recap.lines if line.kind == "asked"]
    assert [line.text for line in asked] == ["What? Nothing."]
    alerts = [line for line in recap.lines if line.kind == "alert"]
    assert [line.start - T0 for line in alerts] == [-50, 100, 300, 320, 500]
    assert alerts[-1].end is None and "on since" in alerts[-1].text
    assert [line.kind for line in recap.lines if line.kind == "gap"] == ["gap"]
    starts = [line.start for line in recap.lines]
    assert starts == sorted(starts)
    text = recap_text(recap)
    assert "(x3)" in text and "door" in text and len(text.splitlines()) == len(recap.lines) + 1


def test_the_recap_keeps_the_newest_lines_and_says_how_many_went(reader):
    whole = reader.recap(Period(T0, NOW), max_lines=200)
    for lines in (1, 3, 6):  # fewer lines than the alerts alone, and more
        recap = reader.recap(Period(T0, NOW), max_lines=lines, max_thumbnails=0)
        shown = [(line.kind, line.start, line.count) for line in recap.lines]
        assert shown == [(line.kind, line.start, line.count) for line in whole.lines[-lines:]]
        assert recap.left_out == len(whole.lines) - lines and f"{recap.left_out} older" in recap.message
    assert all(line.thumbnail is None for line in recap.lines)
    with pytest.raises(ValueError, match="max_lines"):
        reader.recap(Period(T0, NOW), max_lines=0)


def test_an_empty_period_says_so(reader):
    recap = reader.recap(Period(T0 - DAY_S, T0 - DAY_S + 60))
    assert recap.lines == [] and recap.message.startswith("Nothing in the timeline")
    summary = reader.summary(Period(T0 - DAY_S, T0 - DAY_S + 60))
    assert summary.watches == [] and summary.streams == []


def test_known_names_list_every_stream_and_watch(reader):
    streams, watches = reader.names()
    assert streams == ["cam", "yard"] and watches == [("cam", "car"), ("cam", "door")]


def test_periods_that_cannot_be_summed_are_refused_with_the_reason():
    assert period(now=NOW) == Period(NOW - DAY_S, NOW)
    assert period(T0, NOW + 999, now=NOW) == Period(T0, NOW)  # an end in the future is now
    with pytest.raises(PeriodError, match="ends before it starts"):
        period(NOW - 10, NOW - 20, now=NOW)
    with pytest.raises(PeriodError, match="in the future"):
        period(NOW + 10, NOW + 20, now=NOW)
    with pytest.raises(PeriodError, match="keeps 7 days"):
        period(NOW - 8 * DAY_S, now=NOW, keep_days=7)
    with pytest.raises(PeriodError, match="finite"):
        period(float("nan"), now=NOW)


def test_runs_compare_words_not_case_spacing_or_end_punctuation():
    assert same_words(" A red  Ball. ") == same_words("a red ball") != same_words("a red balls")


def test_times_are_read_as_ages_epoch_seconds_or_iso_dates():
    from timeline.period import parse_time

    assert parse_time("2h", now=NOW) == NOW - 7200 and parse_time("1d", now=NOW) == NOW - DAY_S
    assert parse_time(str(T0)) == T0
    assert parse_time("2026-12-02T18:00+00:00") == 1_796_234_400.0
    for bad in ("nan", "soon", "1e999", "9" * 100):
        with pytest.raises(PeriodError, match="expected|at most"):
            parse_time(bad)


def test_an_end_whose_begin_is_gone_counts_its_time_on_but_no_begin(timeline_location):
    """Retention by size deletes the oldest rows: an alert's end may outlive its begin."""
    from tests.support.timeline_backends import query

    store = TimelineStore(TimelineConfig(timeline_location))
    store.write(ROWS, now=NOW)
    store.db.close()
    query(timeline_location, "DELETE FROM moments WHERE alert_id = 'a1' AND state = 'begin'")
    with TimelineReader(timeline_location) as reader:
        whole = reader.summary(Period(T0, NOW), watch="door").watches[0]
        hourly = reader.summary(Period(T0, NOW), watch="door", bucket="hour").watches[0]
    assert whole.began == hourly.began == 2  # a2, a3
    assert whole.on_s == pytest.approx(hourly.on_s) == pytest.approx(50 + 60 + 10 + 100)
