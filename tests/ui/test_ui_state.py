"""The page's live state and rendering: events in, what the components show out. No browser, no model."""

import base64
import dataclasses
import io
import threading

import numpy as np
from PIL import Image

from tests.support.event_helpers import make_event
from ui import alert_view, render
from ui.alerts import MAX_ALERTS
from ui.page import clear_chat, live_updates, plot_updates
from ui.preview_files import PreviewFiles
from ui.state import LiveState, MemoryPoint
from watches.scheduler import StandingQuestion


def clip(index, t, cache_tokens, prefill=50, budget=256, kv_per_token=1000, frame_value=0):
    return make_event(
        "clip",
        index=index,
        stream_time=t,
        t_start=t - 4.0,
        frames=4,
        visual_tokens=prefill - 6,
        prefill_tokens=prefill,
        cache_tokens=cache_tokens,
        budget=budget,
        evict_ms=0.1,
        kv_bytes=cache_tokens * kv_per_token,
        dropped_clips=0,
        preview=np.full((8, 8, 3), frame_value, np.uint8),
    )


def answer_events(round_, question, pieces, auto, t=8.0, cache=(100, 100, 120)):
    yield make_event("answer_start", round=round_, question=question, auto=auto, stream_time=t)
    for piece in pieces:
        yield make_event("answer_piece", round=round_, text=piece)
    yield make_event(
        "answer",
        round=round_,
        question=question,
        answer="".join(pieces),
        answer_tokens=len(pieces),
        prefill_tokens=12,
        ttft_s=0.25,
        decode_tokens_per_s=12.5,
        cache_tokens_before=cache[0],
        cache_tokens_after=cache[1],
        cache_tokens_end=cache[2],
        evict_ms=0.2,
        kv_bytes=cache[2] * 1000,
        auto=auto,
        stream_time=t,
    )


def feed(live, events):
    for event in events:
        live(event)


def test_an_answer_streams_piece_by_piece_then_shows_its_metrics():
    live = LiveState()
    events = list(answer_events(1, "What is happening now?", ["A car", " drives", " by."], auto=True))
    live(events[0])
    live(events[1])
    user, bot = render.chat_messages(live.snapshot())
    assert user == {"role": "user", "content": "*[auto]* What is happening now?"}
    assert bot["role"] == "assistant" and bot["content"].startswith("A car") and "▍" in bot["content"]
    assert "round" not in bot["content"]
    live(events[2])
    assert render.chat_messages(live.snapshot())[1]["content"].startswith("A car drives")
    live(events[3])
    live(events[4])
    bot = render.chat_messages(live.snapshot())[1]["content"]
    assert bot.startswith("A car drives by.") and "▍" not in bot
    assert "round 1" in bot and "t = 8.0 s" in bot and "ttft 0.25 s" in bot and "12.5 tokens/s" in bot
    assert "cache 100 → 100 tokens" in bot


def test_a_persons_questions_wait_in_order_and_are_not_marked_auto():
    live = LiveState()
    live.question_queued("first?")
    live.question_queued("second?")
    messages = render.chat_messages(live.snapshot())
    assert [m["content"] for m in messages[::2]] == ["first?", "second?"]
    assert all("queued" in m["content"] for m in messages[1::2])
    feed(live, answer_events(1, "standing?", ["x"], auto=True))  # an automatic one can come in between
    feed(live, answer_events(2, "first?", ["one"], auto=False))
    turns = live.snapshot().turns
    assert [(t.question, t.round, t.auto, t.done) for t in turns] == [
        ("first?", 2, False, True),  # answered in place: the chat keeps the order they were asked in
        ("second?", None, False, False),
        ("standing?", 1, True, True),
    ]
    live(make_event("error", where="question", message="the question is too long for the cache budget"))
    second = live.snapshot().turns[1]
    assert second.error and not second.queued
    assert "Not answered" in render.turn_messages(second)[1]["content"]
    assert live.snapshot().log[-1].kind == "error"


def test_a_failed_answer_is_shown_as_failed_and_the_next_one_is_separate():
    live = LiveState()
    events = list(answer_events(1, "q?", ["par"], auto=False))
    feed(live, events[:2])
    live(make_event("error", where="answer", message="round 1 failed: boom"))
    feed(live, answer_events(1, "q2?", ["ok"], auto=False))  # rounds restart after a reset: still a new turn
    first, second = live.snapshot().turns
    assert first.error == "round 1 failed: boom" and first.answer == "par"
    assert "**Failed:**" in render.turn_messages(first)[1]["content"]
    assert second.answer == "ok" and second.done


def test_clips_update_preview_and_plot_points_with_budget_memory_and_a_growing_reference():
    samples = iter(range(100, 200))
    live = LiveState(memory_sample=lambda: MemoryPoint(next(samples) * 2**20, "process memory (CPU)", "cpu"))
    live(clip(0, 4.0, 50, frame_value=1))
    live(clip(1, 8.0, 100, frame_value=2))
    live(clip(2, 12.0, 140, frame_value=3))  # evicted: 150 tokens seen, 140 kept
    snap = live.snapshot()
    assert snap.preview[0, 0, 0] == 3 and snap.preview_time == 12.0 and snap.preview_clip == 2
    assert "t = 12.0 s" in render.preview_caption(snap)
    assert [(p.t, p.cache_tokens, p.tokens_seen, p.budget) for p in snap.points] == [
        (4.0, 50, 50, 256),
        (8.0, 100, 100, 256),
        (12.0, 140, 150, 256),
    ]
    assert snap.points[-1].full_kv_bytes == 150 * 1000 and snap.points[-1].kv_bytes == 140 * 1000
    assert [p.memory_bytes for p in snap.points] == [100 * 2**20, 101 * 2**20, 102 * 2**20]
    assert snap.memory_label == "process memory (CPU)" and snap.memory_backend == "cpu"

    cache = render.cache_frame(snap)
    assert list(cache.columns) == [render.X, "tokens", "series"]
    assert set(cache["series"]) == set(render.CACHE_SERIES)
    assert (cache[cache["series"] == "budget"]["tokens"] == 256).all()
    assert cache[render.X].dtype == "float64" and cache["tokens"].dtype == "float64"
    memory = render.memory_frame(snap, snap.memory_label)
    rss = memory[memory["series"] == "process memory (CPU)"]["MiB"].tolist()
    assert rss == [100.0, 101.0, 102.0]


def test_a_new_source_continues_the_plot_time_axis_and_answers_add_points():
    live = LiveState()
    live(clip(0, 4.0, 50))
    live(clip(1, 8.0, 100))
    feed(live, answer_events(1, "q?", ["a", "b"], auto=True, t=8.0, cache=(112, 112, 114)))
    live(clip(0, 4.0, 160))  # another source: its stream time starts again
    times = [p.t for p in live.snapshot().points]
    assert times == [4.0, 8.0, 8.0, 12.0]
    assert live.snapshot().points[2].tokens_seen == 100 + 12 + 2
    live.memory_reset()
    live(clip(1, 8.0, 40))
    assert live.snapshot().points[-1].tokens_seen == 50  # a never-evicting cache would also have been emptied


def test_plot_frames_are_typed_even_when_empty():
    frame = render.cache_frame(LiveState().snapshot())
    assert frame.empty and frame[render.X].dtype == "float64" and frame["series"].dtype == "string"


def test_status_follows_the_stream_and_the_log_keeps_errors():
    live = LiveState(budget=256)
    schedule = StandingQuestion("What now?", every_s=8)
    assert "Idle" in render.status_markdown(live.snapshot(), schedule.question, schedule.every_s)
    live(make_event("status", stream="main", message="watching file 'a.mp4'"))
    live(clip(0, 4.0, 50))
    text = render.status_markdown(live.snapshot(), schedule.question, schedule.every_s)
    assert "Watching" in text and "a.mp4" in text and "50 / 256 tokens" in text and "every 8 s" in text
    live(make_event("error", where="capture", message="stream dropped, reconnecting"))
    live(make_event("end", reason="eof", message="file 'a.mp4' ended"))
    snap = live.snapshot()
    assert snap.source is None and "ended" in render.status_markdown(snap, "q", 0)
    log = render.log_markdown(snap.log)
    assert "⚠ capture: stream dropped, reconnecting" in log
    assert log.index("ended") < log.index("stream dropped")  # newest first


def test_a_tab_gets_only_what_changed_since_its_last_refresh():
    live = LiveState()
    schedule = StandingQuestion("q", every_s=8)
    seen, out = live_updates(live.snapshot(), {}, schedule)
    assert set(out) == {"chat", "preview", "caption", "status", "log", "banner", "alerts"}  # a new tab: everything
    seen, out = live_updates(live.snapshot(), seen, schedule)
    assert out == {}
    events = list(answer_events(1, "q", ["a"], auto=True))
    live(events[0])
    seen, out = live_updates(live.snapshot(), seen, schedule)
    assert set(out) == {"chat"}
    other_tab_seen, out = live_updates(live.snapshot(), {}, schedule)
    assert len(out["chat"]) == 2
    schedule.update(every_s=4)  # edited in another tab: the status line follows
    _, out = live_updates(live.snapshot(), seen, schedule)
    assert set(out) == {"status"} and "every 4 s" in out["status"]


def test_plots_wait_for_the_first_point_then_refresh_only_on_change():
    live = LiveState()
    seen, out = plot_updates(live.snapshot(), None, "process memory (CPU)")
    assert out == {} and seen is None
    live(clip(0, 4.0, 50))
    seen, out = plot_updates(live.snapshot(), seen, "process memory (CPU)")
    assert set(out) == {"cache", "memory"} and len(out["cache"]) == 3
    assert plot_updates(live.snapshot(), seen, "process memory (CPU)")[1] == {}


def test_events_from_the_model_thread_and_reads_from_many_tabs_at_once():
    live = LiveState(memory_sample=lambda: MemoryPoint(1, "m", "cpu"))
    schedule = StandingQuestion("q", every_s=8)
    errors = []

    def model_worker():
        for i in range(200):
            live(clip(i, 4.0 * (i + 1), 50))
            feed(live, answer_events(i + 1, f"q{i}", ["a", "b", "c"], auto=i % 2 == 0))

    def tab():
        seen: dict = {}
        try:
            for _ in range(300):
                seen, _ = live_updates(live.snapshot(), seen, schedule)
                render.cache_frame(live.snapshot())
        except Exception as err:  # any failure here is the test's failure
            errors.append(err)

    threads = [threading.Thread(target=model_worker)] + [threading.Thread(target=tab) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    snap = live.snapshot()
    assert len(snap.turns) == 200 and all(t.done and t.answer == "abc" for t in snap.turns)
    assert len(snap.points) == 400


def test_clearing_the_chat_hides_earlier_turns_in_that_tab_only():
    live = LiveState()
    schedule = StandingQuestion("q", every_s=8)
    feed(live, answer_events(1, "old?", ["a"], auto=True))
    live.question_queued("waiting?")
    seen, _ = live_updates(live.snapshot(), {}, schedule)
    seen = clear_chat(live.snapshot(), seen)
    seen, out = live_updates(live.snapshot(), seen, schedule)
    assert out["chat"] == []
    feed(live, answer_events(2, "waiting?", ["b"], auto=False))  # answered in place: stays hidden
    feed(live, answer_events(3, "new?", ["c"], auto=True))
    seen, out = live_updates(live.snapshot(), seen, schedule)
    assert [m["content"] for m in out["chat"]][0] == "*[auto]* new?"
    _, other_tab = live_updates(live.snapshot(), {}, schedule)
    assert len(other_tab["chat"]) == 6


def test_each_preview_frame_is_written_once_and_only_the_newest_are_kept(tmp_path):
    files = PreviewFiles(tmp_path, keep=2)
    red = np.zeros((6, 8, 3), np.uint8)
    red[..., 0] = 255
    first = files.path_for(1, red)
    mtime = (tmp_path / first).stat().st_mtime_ns
    assert files.path_for(1, np.zeros_like(red)) == first  # another tab, same version: the same file, untouched
    assert (tmp_path / first).stat().st_mtime_ns == mtime
    with Image.open(first) as img:
        assert img.size == (8, 6) and img.getpixel((4, 3))[0] > 200
    files.path_for(2, red)
    files.path_for(3, red)
    assert sorted(p.name.rsplit("-", 1)[1] for p in tmp_path.iterdir()) == ["2.jpg", "3.jpg"]
    files.close()
    assert not tmp_path.exists()


def test_the_host_store_gets_its_own_memory_series_and_status_line_when_recall_is_on():
    live = LiveState()
    for index, (t, store_mib) in enumerate([(4.0, 0.5), (8.0, 1.0), (12.0, 1.0)]):
        event = clip(index, t, 100)
        store = dict(store_tokens=int(store_mib * 1000), store_bytes=int(store_mib * 2**20))
        live(dataclasses.replace(event, stats=dataclasses.replace(event.stats, **store, store_oldest_time=4.0 * index)))
    snap = live.snapshot()
    memory = render.memory_frame(snap, "process memory (CPU)")
    store = memory[memory["series"] == render.KV_SERIES[2]]["MiB"].tolist()
    assert store == [0.5, 1.0, 1.0]  # fills to its bound while the device KV series stays flat
    assert memory[memory["series"] == render.KV_SERIES[0]]["MiB"].nunique() == 1
    status = render.status_markdown(snap, "q", 10)
    assert "host store 1000 tokens · 1.0 MiB · holds the stream from t = 8.0 s" in status

    without = LiveState()
    without(clip(0, 4.0, 100))
    assert render.KV_SERIES[2] not in set(render.memory_frame(without.snapshot(), "x")["series"])
    assert "host store" not in render.status_markdown(without.snapshot(), "q", 10)


def on(stream, event, t_wall=None):
    """The event as stream `stream` publishes it (`t_wall` fixed for the run-time axis)."""
    event = dataclasses.replace(event, stream=stream)
    return event if t_wall is None else dataclasses.replace(event, t_wall=t_wall)


def two_streams(**kwargs):
    return LiveState(streams=("a", "b"), budget=256, **kwargs)


def test_two_streams_keep_their_own_previews_times_and_cache_tokens():
    live = two_streams()
    live(on("a", make_event("status", message="watching file 'a.mp4'")))
    live(on("b", make_event("status", message="watching file 'b.mp4'")))
    live(on("a", clip(0, 4.0, 50, frame_value=1), t_wall=100.0))
    live(on("b", clip(0, 4.0, 70, frame_value=2), t_wall=101.0))
    live(on("a", clip(1, 8.0, 100, frame_value=3), t_wall=104.0))
    snap = live.snapshot()
    a, b = snap.stream("a"), snap.stream("b")
    assert [v.name for v in snap.streams] == ["a", "b"] and snap.multi
    assert a.preview[0, 0, 0] == 3 and a.preview_clip == 1 and a.stream_time == 8.0 and a.clips == 2
    assert b.preview[0, 0, 0] == 2 and b.preview_clip == 0 and b.stream_time == 4.0 and b.clips == 1
    assert a.preview_version != b.preview_version  # one preview file per frame, never shared
    assert (a.cache_tokens, b.cache_tokens) == (100, 70) and (a.source, b.source) == ("file 'a.mp4'", "file 'b.mp4'")
    assert a.kv_bytes == 100 * 1000 and snap.total_kv_bytes == 170 * 1000
    assert "a.mp4" in render.stream_status(a) and "b.mp4" not in render.stream_status(a)
    assert "100 / 256 tokens" in render.stream_status(a) and "70 / 256 tokens" in render.stream_status(b)
    # b's time axis is its own: a's second source restart must not shift it, and b never restarts because of a
    live(on("a", clip(0, 4.0, 20), t_wall=105.0))
    live(on("b", clip(1, 8.0, 90), t_wall=106.0))
    by_stream = {name: [p.t for p in live.snapshot().points if p.stream == name] for name in "ab"}
    assert by_stream == {"a": [4.0, 8.0, 12.0], "b": [4.0, 8.0]}


def test_two_streams_plot_a_kv_line_each_and_their_total_over_run_time():
    live = two_streams(memory_sample=lambda: MemoryPoint(300 * 2**20, "process memory (CPU)", "cpu"))
    live(on("a", clip(0, 4.0, 50, kv_per_token=2**20 // 100), t_wall=10.0))
    live(on("b", clip(0, 4.0, 100, kv_per_token=2**20 // 100), t_wall=12.0))
    live(on("a", clip(1, 8.0, 200, kv_per_token=2**20 // 100), t_wall=14.0))
    snap = live.snapshot()
    memory = render.memory_frame(snap, "process memory (CPU)")
    assert list(memory.columns) == [render.X_RUN, "MiB", "series"]

    def series(name):
        rows = memory[memory["series"] == name]
        return list(zip(rows[render.X_RUN].tolist(), rows["MiB"].round(2).tolist(), strict=True))

    assert series(render.kv_series("a")) == [(0.0, 0.5), (4.0, 2.0)]
    assert series(render.kv_series("b")) == [(2.0, 1.0)]
    assert series(render.TOTAL_KV) == [(0.0, 0.5), (2.0, 1.5), (4.0, 3.0)]  # a's latest + b's latest
    assert series("process memory (CPU)") == []  # hundreds of times the KV: it is in the status line instead
    assert "process memory (CPU): 300 MiB" in render.status_markdown(snap, "q", 8)
    cache = render.cache_frame(snap)
    assert set(cache["series"]) == {render.cache_series("a"), render.cache_series("b"), render.CACHE_SERIES[1]}
    assert cache[cache["series"] == render.cache_series("b")]["tokens"].tolist() == [100.0]
    # one stream: the plots keep their own stream-time axis and single KV line
    single = LiveState()
    single(clip(0, 4.0, 50))
    assert render.KV_SERIES[0] in set(render.memory_frame(single.snapshot(), "m")["series"])
    assert render.X in render.memory_frame(single.snapshot(), "m").columns


def test_a_reconnecting_stream_is_shown_reconnecting_while_the_other_watches():
    live = two_streams()
    for name in "ab":
        live(on(name, make_event("status", message=f"watching rtsp://cam-{name}/live")))
        live(on(name, clip(0, 4.0, 50)))
    live(
        on("b", make_event("capture", kind="reconnect", message="connection lost; retry in 1 s", state="reconnecting"))
    )
    snap = live.snapshot()
    assert (snap.stream("a").state, snap.stream("b").state) == ("watching", "reconnecting")
    assert "Reconnecting" in render.stream_status(snap.stream("b"))
    assert "Watching" in render.stream_status(snap.stream("a"))
    assert "a: watching · b: reconnecting" in render.status_markdown(snap, "q", 8)
    assert "b · reconnect: connection lost" in render.log_markdown(snap.log)
    live(on("b", clip(1, 8.0, 60)))  # a clip again: it is back
    assert live.snapshot().stream("b").state == "watching"
    live(on("a", make_event("end", reason="eof", message="rtsp://cam-a/live ended")))
    live(make_event("status", stream=None, message="assistant ready"))  # process-wide: no stream changes
    snap = live.snapshot()
    assert (snap.stream("a").state, snap.stream("b").state) == ("ended", "watching")
    live(make_event("status", stream=None, message="assistant stopped"))
    assert all(v.source is None for v in live.snapshot().streams)


def test_answers_are_labelled_with_their_stream_and_a_question_to_all_queues_one_turn_each():
    live = two_streams()
    live.question_queued("what is red?", stream="b")
    live.question_queued("anyone moving?")  # every stream
    assert [(t.question, t.stream) for t in live.snapshot().turns] == [
        ("what is red?", "b"),
        ("anyone moving?", "a"),
        ("anyone moving?", "b"),
    ]
    # both streams' sessions count rounds from 1: the answer goes to its own stream's turn
    feed(live, (on("b", e) for e in answer_events(1, "what is red?", ["the ", "ball"], auto=False)))
    feed(live, (on("a", e) for e in answer_events(1, "anyone moving?", ["no"], auto=False)))
    turns = live.snapshot().turns
    assert [(t.stream, t.answer, t.done) for t in turns] == [
        ("b", "the ball", True),
        ("a", "no", True),
        ("b", "", False),
    ]
    user, bot = render.chat_messages(live.snapshot())[:2]
    assert user["content"] == "**[b]** what is red?" and "stream b · round 1" in bot["content"]
    assert "stream a" not in bot["content"]
    live(on("b", make_event("error", where="question", message="too long")))
    assert live.snapshot().turns[2].error == "too long" and live.snapshot().turns[1].error is None
    # with one stream the chat has no labels
    single = LiveState()
    feed(single, answer_events(1, "q?", ["x"], auto=False))
    assert render.chat_messages(single.snapshot())[0]["content"] == "q?"


def test_a_page_with_two_streams_refreshes_each_panel_and_a_summary():
    live = two_streams()
    schedule = StandingQuestion("q", every_s=8)
    seen, out = live_updates(live.snapshot(), {}, schedule)
    panels = {f"{k}:{n}" for n in "ab" for k in ("preview", "caption", "panel")}
    assert set(out) == {"chat", "status", "log", "banner", "alerts"} | panels
    live(on("b", clip(0, 4.0, 50, frame_value=9)))
    seen, out = live_updates(live.snapshot(), seen, schedule)
    assert {"preview:b", "caption:b", "panel:b"} <= set(out) and "preview:a" not in out and "panel:a" not in out
    assert out["preview:b"][0, 0, 0] == 9 and "t = 4.0 s" in out["caption:b"]


# -- alerts of the yes/no watches -------------------------------------------------------------------------


def jpeg(width=320, height=240, value=90) -> bytes:
    out = io.BytesIO()
    Image.fromarray(np.full((height, width, 3), value, np.uint8)).save(out, format="JPEG")
    return out.getvalue()


def alert_begin(stream, name, t, t_wall, p_yes=0.93, question="Is there a person?", snapshot=True):
    fields = {"snapshot": jpeg(), "snapshot_bytes": len(jpeg())} if snapshot else {}
    return make_event(
        "alert",
        stream=stream,
        id=f"{stream}-{name}-{round(t_wall * 1000)}",
        alert=name,
        state="begin",
        p_yes=p_yes,
        stream_time=t,
        question=question,
        t_wall=t_wall,
        **fields,
    )


def alert_end(begin, t, duration_s, p_yes=0.1):
    return make_event(
        "alert",
        stream=begin.stream,
        id=begin.id,
        alert=begin.alert,
        state="end",
        p_yes=p_yes,
        stream_time=t,
        question=begin.question,
        duration_s=duration_s,
        t_wall=begin.t_wall + duration_s,
    )


def test_an_alert_begin_shows_the_banner_and_its_end_removes_it_and_fills_the_duration():
    live = LiveState(streams=["door"])
    begin = alert_begin("door", "person", 44.0, 1_700_000_000.0)
    live(begin)
    snap = live.snapshot()
    assert [a.id for a in snap.active_alerts] == [begin.id] and snap.alerts[0].ongoing
    assert snap.alerts[0].snapshot == begin.snapshot
    seen, out = live_updates(snap, {}, StandingQuestion("q", 0.0))
    banner, rows = out["banner"], out["alerts"]
    assert "person" in banner and "door" in banner and "t = 44.0 s" in banner and "0.93" in banner
    assert banner.count('class="alert-line"') == 1
    assert "ongoing" in rows and "Is there a person?" in rows and "<img" not in rows  # no thumbnails asked for
    assert "alert person began" in snap.log[-1].message and snap.log[-1].kind == "alert"

    live(alert_end(begin, 56.0, 12.0))
    snap = live.snapshot()
    assert snap.active_alerts == () and len(snap.alerts) == 1
    ended = snap.alerts[0]
    assert ended.duration_s == 12.0 and ended.end_time == 56.0 and not ended.ongoing
    assert ended.p_yes == 0.93 and ended.snapshot == begin.snapshot  # the begin's p_yes and snapshot stay
    seen, out = live_updates(snap, seen, StandingQuestion("q", 0.0))
    assert out["banner"] == ""
    assert "12.0 s" in out["alerts"] and "ongoing" not in out["alerts"] and "t = 56.0 s" in out["alerts"]
    assert "banner" not in live_updates(snap, seen, StandingQuestion("q", 0.0))[1]  # unchanged: not re-sent


def test_two_alerts_on_two_streams_are_both_in_the_banner_until_each_ends():
    live = LiveState(streams=["door", "yard"])
    door = alert_begin("door", "person", 8.0, 1_700_000_000.0)
    yard = alert_begin("yard", "car", 12.0, 1_700_000_004.0, p_yes=0.71, question="Is there a car?")
    feed(live, [door, yard])
    snap = live.snapshot()
    assert [(a.stream, a.alert) for a in snap.active_alerts] == [("door", "person"), ("yard", "car")]
    banner = live_updates(snap, {}, StandingQuestion("q", 0.0))[1]["banner"]
    assert "2 alerts on" in banner and banner.count('class="alert-line"') == 2
    assert banner.index("door") < banner.index("yard")
    assert "yard · alert car began" in snap.log[-1].message  # labelled with its stream

    live(alert_end(door, 20.0, 12.0))
    snap = live.snapshot()
    assert [a.stream for a in snap.active_alerts] == ["yard"]
    assert [(a.stream, a.ongoing) for a in snap.alerts] == [("yard", True), ("door", False)]


def test_the_alert_list_is_bounded_newest_first_and_keeps_an_old_ongoing_alert_in_the_banner():
    live = LiveState(streams=["door"])
    long_one = alert_begin("door", "person", 0.0, 1_700_000_000.0)
    live(long_one)
    others = [alert_begin("door", "car", 4.0 * i, 1_700_000_000.0 + i, snapshot=False) for i in range(1, 61)]
    feed(live, others)
    snap = live.snapshot()
    assert len(snap.alerts) == MAX_ALERTS == 50
    assert [a.id for a in snap.alerts] == [e.id for e in reversed(others[-50:])]
    assert long_one.id in [a.id for a in snap.active_alerts]  # out of the list, still on
    live(alert_end(long_one, 300.0, 300.0))
    snap = live.snapshot()
    assert long_one.id not in [a.id for a in snap.active_alerts + snap.alerts]  # not added back at the top


def test_the_list_shows_a_thumbnail_per_snapshot_made_once_and_forgotten_with_its_alert():
    live = LiveState(streams=["door"])
    with_snapshot = alert_begin("door", "person", 4.0, 1_700_000_000.0)
    without = alert_begin("door", "car", 8.0, 1_700_000_001.0, snapshot=False)
    feed(live, [with_snapshot, without])
    thumbs = alert_view.Thumbnails()
    srcs = thumbs.for_alerts(live.snapshot().alerts)
    assert srcs[without.id] is None
    src = srcs[with_snapshot.id]
    assert src.startswith("data:image/jpeg;base64,")
    thumb = Image.open(io.BytesIO(base64.b64decode(src.split(",", 1)[1])))
    assert thumb.width == alert_view.THUMB_WIDTH and thumb.height == 120  # 320x240 scaled down
    assert thumbs.for_alerts(live.snapshot().alerts)[with_snapshot.id] is src  # made once
    rows = live_updates(live.snapshot(), {}, StandingQuestion("q", 0.0), thumbs.for_alerts)[1]["alerts"]
    assert rows.count("<img") == 1 and src in rows
    assert thumbs.for_alerts(()) == {} and thumbs.for_alerts(live.snapshot().alerts)[with_snapshot.id] is not src


def test_an_ended_stream_closes_its_alerts_and_an_unknown_end_changes_nothing():
    live = LiveState(streams=["door", "yard"])
    door, yard = alert_begin("door", "person", 4.0, 1_700_000_000.0), alert_begin("yard", "car", 4.0, 1_700_000_001.0)
    feed(live, [door, yard])
    version = live.snapshot().alerts_version
    live(alert_end(alert_begin("door", "person", 1.0, 1_600_000_000.0), 9.0, 8.0))  # its begin was never seen
    assert live.snapshot().alerts_version == version
    live(make_event("end", stream="door", reason="eof", t_wall=1_700_000_010.0))
    snap = live.snapshot()
    assert [a.stream for a in snap.active_alerts] == ["yard"]
    closed = next(a for a in snap.alerts if a.stream == "door")
    assert closed.closed_by == "the stream ended" and closed.duration_s is None
    assert "the stream ended" in alert_view.alerts_html(snap.alerts)
    live(make_event("status", stream=None, message="assistant stopped"))
    assert live.snapshot().active_alerts == ()


def test_checks_update_each_watchs_latest_p_yes_in_its_streams_panel():
    live = LiveState(streams=["door", "yard"])
    feed(
        live,
        [
            make_event("check", stream="door", alert="person", p_yes=0.83, ms=41.2, stream_time=4.0),
            make_event("check", stream="door", alert="car", p_yes=0.12, ms=40.0, stream_time=4.0),
            make_event("check", stream="yard", alert="person", p_yes=0.05, ms=39.0, stream_time=4.0),
            make_event("check", stream="door", alert="person", p_yes=0.4, ms=41.0, stream_time=8.0),
        ],
    )
    snap = live.snapshot()
    assert snap.stream("door").checks == (("person", 0.4), ("car", 0.12))
    assert snap.stream("yard").checks == (("person", 0.05),)
    seen, out = live_updates(snap, {}, StandingQuestion("q", 0.0))
    assert "watches: person 0.40 · car 0.12" in out["panel:door"]
    assert "watches: person 0.05" in out["panel:yard"]
    assert "watches" not in render.stream_status(LiveState().snapshot().default)


def test_answers_of_two_streams_decoded_at_once_each_reach_their_own_turn():
    """Answers decoded together (one host's batch, or two hosts of a fleet) interleave their pieces."""
    live = two_streams()
    live.question_queued("what is red?", stream="a")
    live.question_queued("what is blue?", stream="b")
    a = list(on("a", e) for e in answer_events(1, "what is red?", ["the ", "ball"], auto=False))
    b = list(on("b", e) for e in answer_events(1, "what is blue?", ["the ", "sky"], auto=False))
    feed(live, [a[0], b[0], a[1], b[1], b[2], a[2], b[3], a[3]])  # starts, pieces and ends interleaved
    turns = live.snapshot().turns
    assert [(t.stream, t.answer, t.done) for t in turns] == [("a", "the ball", True), ("b", "the sky", True)]
    assert all(t.stats.ttft_s == 0.25 for t in turns)
    live.question_queued("and now?", stream="b")
    feed(live, [on("b", make_event("answer_start", round=2, question="and now?", stream_time=9.0))])
    live(on("b", make_event("error", where="answer", message="decode failed")))
    assert live.snapshot().turns[-1].error == "decode failed" and live.snapshot().turns[0].error is None


def test_a_fleet_streams_panel_says_the_host_it_runs_on_or_why_it_waits():
    live = two_streams()
    assert render.placement_line(live.snapshot().stream("a")) == ""  # one process: nothing said
    placed = make_event(
        "status", stream="a", kind="stream_placed", message="runs on host door-1a2b3c-0; memory: ...",
        host="door-1a2b3c-0",
    )  # fmt: skip
    live(placed)
    live(on("b", make_event("status", kind="stream_placed", message="runs on host yard-0", host="yard-0")))
    snap = live.snapshot()
    assert snap.stream("a").host == "door-1a2b3c-0" and snap.stream("b").host == "yard-0"
    assert render.stream_status(snap.stream("a")).startswith("on host **door-1a2b3c-0**")
    assert "a: idle on door-1a2b3c-0" in render.status_markdown(snap, "q", 0.0)
    lost = make_event("status", kind="host_lost", message="host door-1a2b3c-0 lost (died); moving: a", host="door")
    live(lost)
    live(on("a", make_event("status", kind="stream_waiting", message="waiting: its host door-1a2b3c-0 was lost")))
    view = live.snapshot().stream("a")
    assert view.host is None and view.waiting == "its host door-1a2b3c-0 was lost"
    assert render.stream_status(view).startswith("**no host now**: its host door-1a2b3c-0 was lost")
    assert live.snapshot().stream("b").host == "yard-0"  # a host lost elsewhere changes nothing here
    live(on("a", make_event("status", kind="stream_placed", message="runs on host yard-0", host="yard-0")))
    assert live.snapshot().stream("a").host == "yard-0" and live.snapshot().stream("a").waiting is None
