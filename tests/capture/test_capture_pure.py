"""Capture logic that needs no video: source parsing, config validation, sampling, clips, stream
clock, reconnect schedule, the drop-oldest queue, pacing."""

from __future__ import annotations

import queue
import threading

import numpy as np
import pytest

from capture import (
    CaptureConfig,
    ClipAssembler,
    DropOldestQueue,
    FrameSampler,
    ReconnectPolicy,
    StreamClock,
    fit_size,
    parse_source,
)
from capture.sampling import pacing_delay


@pytest.mark.parametrize(
    "source, kind, target",
    [
        (0, "camera", 0),
        ("2", "camera", 2),
        ("/dev/video1", "camera", 1),
        ("gst:videotestsrc ! appsink", "gstreamer", "videotestsrc ! appsink"),
        ("rtsp://cam.local:554/stream", "url", "rtsp://cam.local:554/stream"),
        ("HTTPS://example.com/a.m3u8", "url", "HTTPS://example.com/a.m3u8"),
        ("file:///tmp/a.mp4", "file", "/tmp/a.mp4"),
        ("videos/0.mp4", "file", "videos/0.mp4"),
    ],
)
def test_parse_source_kinds(source, kind, target):
    spec = parse_source(source)
    assert (spec.kind, spec.target) == (kind, target)


@pytest.mark.parametrize("bad", ["ftp://host/x.mp4", "", "gst:", -1, True])
def test_parse_source_rejects(bad):
    with pytest.raises(ValueError):
        parse_source(bad)


def test_unsupported_scheme_message_lists_allowed():
    with pytest.raises(ValueError, match="rtsp://"):
        parse_source("ftp://host/x.mp4")


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"fps": 0}, "fps"),
        ({"fps": float("nan")}, "fps"),
        ({"clip_seconds": -1}, "clip_seconds"),
        ({"fps": 0.1, "clip_seconds": 4}, "fps \\* clip_seconds"),
        ({"max_size": (0, 10)}, "max_size"),
        ({"max_size": (640,)}, "max_size"),
        ({"queue_size": 0}, "queue_size"),
        ({"rtsp_transport": "http"}, "tcp"),
        ({"read_timeout_s": 0}, "read_timeout_s"),
    ],
)
def test_config_validation_names_the_field(kwargs, words):
    with pytest.raises(ValueError, match=words):
        CaptureConfig("a.mp4", **kwargs)


def test_loop_is_for_files_only():
    with pytest.raises(ValueError, match="files only"):
        CaptureConfig("rtsp://cam/stream", loop=True)
    assert CaptureConfig("a.mp4", loop=True).loop


def test_config_defaults_are_consistent():
    cfg = CaptureConfig("a.mp4")
    assert cfg.fps * cfg.clip_seconds >= 1 and cfg.queue_size >= 1 and not cfg.is_live
    assert CaptureConfig(0).is_live and CaptureConfig("http://h/s.ts").is_live


@pytest.mark.parametrize(
    "src, box, expected",
    [
        ((1920, 1080), (448, 448), (448, 252)),
        ((1080, 1920), (448, 448), (252, 448)),
        ((641, 359), (320, 320), (320, 179)),
        ((320, 240), (640, 640), (320, 240)),  # never upscaled
        ((320, 240), None, (320, 240)),
    ],
)
def test_fit_size_keeps_aspect_inside_box(src, box, expected):
    assert fit_size(*src, box) == expected


def _sample(times, fps):
    sampler = FrameSampler(fps)
    return [t for t in times if sampler.offer(t)]


def test_sampler_constant_rate_hits_grid_within_one_frame():
    times = [i / 30 for i in range(300)]  # 10 s at 30 fps
    kept = _sample(times, 2.0)
    assert len(kept) == 20
    for k, t in enumerate(kept):
        assert k / 2.0 - 1e-9 <= t < k / 2.0 + 1 / 30


def test_sampler_non_integer_ratio_does_not_drift():
    times = [i / 29.97 for i in range(2997)]  # 100 s
    kept = _sample(times, 1.0)
    assert len(kept) == 100
    assert all(abs(t - k) < 1 / 29.97 for k, t in enumerate(kept))


def test_sampler_variable_rate_uses_timestamps_not_counts():
    # 60 fps for 2 s, then 5 fps for 4 s, then 30 fps for 2 s
    times = [i / 60 for i in range(120)] + [2 + i / 5 for i in range(20)] + [6 + i / 30 for i in range(60)]
    kept = _sample(times, 2.0)
    assert len(kept) == 16
    gaps = np.diff(times)
    for k, t in enumerate(kept):
        local = gaps[max(0, times.index(t) - 1)]
        assert k / 2.0 - 1e-9 <= t <= k / 2.0 + local + 1e-9


def test_sampler_skips_grid_points_inside_a_gap():
    kept = _sample([0.0, 0.5, 1.0, 5.2, 5.5, 6.0], 1.0)
    assert kept == [0.0, 1.0, 5.2, 6.0]


def test_sampler_higher_than_source_rate_keeps_every_frame():
    times = [i / 10 for i in range(20)]
    assert _sample(times, 30.0) == times


def _frame(h=4, w=6):
    return np.zeros((h, w, 3), np.uint8)


def test_clips_are_released_when_full_and_respect_windows():
    asm = ClipAssembler(clip_seconds=2.0, fps=2.0)
    released = []
    for k in range(9):  # 0, 0.5, ..., 4.0
        released += asm.add(k * 0.5, _frame())
    assert [c.timestamps for c in released] == [[0.0, 0.5, 1.0, 1.5], [2.0, 2.5, 3.0, 3.5]]
    assert [(c.t_start, c.t_end) for c in released] == [(0.0, 2.0), (2.0, 4.0)]
    last = asm.flush()
    assert last.timestamps == [4.0] and last.t_start == 4.0 and last.t_end == pytest.approx(4.5)
    assert asm.flush() is None


def test_clip_expected_frames_for_non_integer_products():
    asm = ClipAssembler(clip_seconds=1.0, fps=1.5)  # grid 0, .67, 1.33, 2, 2.67, ...
    assert [asm.expected_frames(w) for w in range(4)] == [2, 1, 2, 1]


def test_a_late_frame_closes_the_previous_window():
    asm = ClipAssembler(clip_seconds=4.0, fps=1.0)
    assert asm.add(0.0, _frame()) == [] and asm.add(1.0, _frame()) == []
    released = asm.add(9.0, _frame())  # a gap: window 0 is closed with 2 of 4 frames
    assert len(released) == 1 and released[0].timestamps == [0.0, 1.0] and released[0].t_end == 4.0


def test_size_change_splits_a_clip():
    asm = ClipAssembler(clip_seconds=4.0, fps=1.0)
    asm.add(0.0, _frame(4, 6))
    released = asm.add(1.0, _frame(8, 6))
    assert len(released) == 1 and released[0].frames[0].shape == (4, 6, 3)
    rest = asm.flush()
    assert rest.frames[0].shape == (8, 6, 3) and rest.t_start == 1.0


def test_stream_clock_starts_at_zero_and_rebases_a_restart():
    clock = StreamClock()
    assert [clock.map(t) for t in (10.0, 10.5, 11.0)] == [0.0, 0.5, 1.0]
    clock.restart()  # e.g. a looped file: raw time restarts at 10
    t = clock.map(10.0)
    assert 1.0 < t < 1.6
    assert clock.map(10.5) == pytest.approx(t + 0.5)


def test_stream_clock_keeps_a_continuing_live_timeline():
    clock = StreamClock()
    clock.map(100.0)
    clock.map(101.0)
    clock.restart()  # reconnected; the live source kept running for 5 s
    assert clock.map(106.0) == pytest.approx(6.0)


def test_stream_clock_rebases_jumps_without_restart():
    clock = StreamClock(max_jump_s=60)
    clock.map(0.0)
    clock.map(1.0)
    assert 1.0 < clock.map(95000.0) < 1.6  # encoder restart / wrap inside one connection
    assert clock.map(None) > 1.0  # no timestamp: extrapolated forward


def test_reconnect_backoff_schedule():
    policy = ReconnectPolicy(initial_delay_s=0.5, max_delay_s=4.0, multiplier=2.0, give_up_after_s=None)
    delays = [policy.decide(n, 0.0).delay_s for n in range(6)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert not any(policy.decide(n, 1e6).give_up for n in range(100))


def test_reconnect_gives_up_on_attempts_or_time():
    by_count = ReconnectPolicy(max_attempts=3, give_up_after_s=None)
    assert not by_count.decide(2, 0).give_up and by_count.decide(3, 0).give_up
    by_time = ReconnectPolicy(initial_delay_s=1, max_delay_s=8, give_up_after_s=30)
    assert not by_time.decide(0, 20).give_up
    assert by_time.decide(3, 25).give_up  # the next wait (8 s) would pass the limit
    assert ReconnectPolicy(enabled=False).decide(0, 0).give_up
    with pytest.raises(ValueError):
        ReconnectPolicy(multiplier=0.5)


def test_drop_oldest_queue_bounds_and_counts():
    q: DropOldestQueue[int] = DropOldestQueue(2)
    dropped = [q.put(i) for i in range(5)]
    assert dropped == [None, None, 0, 1, 2] and q.dropped == 3 and q.qsize() == 2
    assert [q.get_nowait(), q.get_nowait()] == [3, 4]
    with pytest.raises(queue.Empty):
        q.get(timeout=0.01)
    q.put(7)
    q.close()
    assert q.get(timeout=1) == 7
    with pytest.raises(EOFError):
        q.get(timeout=1)
    with pytest.raises(RuntimeError):
        q.put(8)


def test_drop_oldest_queue_close_wakes_a_waiting_consumer():
    q: DropOldestQueue[int] = DropOldestQueue(1)
    result = []

    def consume():
        try:
            q.get(timeout=30)
        except EOFError:
            result.append("eof")

    consumer = threading.Thread(target=consume)
    consumer.start()
    q.close()
    consumer.join(5)
    assert result == ["eof"]


def test_pacing_delay():
    assert pacing_delay(t=5.0, t0=1.0, wall0=100.0, now=102.0) == pytest.approx(2.0)
    assert pacing_delay(t=5.0, t0=1.0, wall0=100.0, now=110.0) == 0.0
