"""The capture thread's contract: bounded queue with counted drops under a slow consumer, stop within
2 seconds, end of stream, and nothing left behind (threads, open files)."""

from __future__ import annotations

import threading
import time

import psutil
import pytest

from capture import CaptureConfig, CaptureThread, Clip, EndOfStream
from tests.support.capture_helpers import Media, drain


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    return Media(tmp_path_factory.mktemp("capture_thread_media"))


@pytest.fixture(scope="module")
def ten_seconds(media):
    return media.video("ten.mp4", "libx264", (160, 120), fps=10, duration_s=10.0)


def test_slow_consumer_drops_oldest_clips_and_counts_them(ten_seconds):
    cfg = CaptureConfig(str(ten_seconds), fps=2.0, clip_seconds=1.0, queue_size=2)
    cap = CaptureThread(cfg, threading.Event())
    cap.start()
    # the consumer reads nothing: the thread must still finish (it never blocks on the consumer)
    assert cap.finished.wait(30)
    stats = cap.stats()
    assert stats.clips == 10 and stats.dropped_clips == 8 and stats.dropped_frames == 16
    left = [cap.get_clip(timeout=1), cap.get_clip(timeout=1)]
    assert [c.index for c in left] == [8, 9]  # the newest were kept
    # each clip carries the drops that happened before it was made
    assert [(c.dropped_clips, c.dropped_frames) for c in left] == [(6, 12), (7, 14)]
    assert isinstance(cap.get_clip(timeout=1), EndOfStream)
    assert cap.join(2.0)


def test_queue_never_holds_more_than_its_bound(ten_seconds):
    cfg = CaptureConfig(str(ten_seconds), fps=4.0, clip_seconds=0.5, queue_size=3)
    cap = CaptureThread(cfg, threading.Event())
    cap.start()
    sizes = []
    while not cap.finished.is_set():
        sizes.append(cap.queued_clips())
        time.sleep(0.001)
    assert max(sizes) <= 3
    out = drain(cap)
    assert len(out.clips) == 3 and out.clips[-1].index == 19
    assert cap.dropped_clips == 17


def test_consumer_slower_than_the_stream_gets_recent_clips(ten_seconds):
    cfg = CaptureConfig(str(ten_seconds), fps=2.0, clip_seconds=1.0, queue_size=1)
    cap = CaptureThread(cfg, threading.Event())
    cap.start()
    got = []
    while not isinstance(item := cap.get_clip(timeout=5), EndOfStream):
        got.append(item)
        cap.finished.wait(0.05)  # a slow model
    indices = [c.index for c in got]
    assert indices == sorted(indices) and indices[-1] == 9
    assert cap.dropped_clips == 10 - len(got)


def test_end_of_stream_is_repeated_and_finished_is_set(ten_seconds):
    cap = CaptureThread(CaptureConfig(str(ten_seconds), fps=1.0, clip_seconds=5.0), threading.Event())
    out = drain(cap)
    assert len(out.clips) == 2 and out.end.reason == "eof"
    assert cap.finished.is_set()
    assert isinstance(cap.get_clip(timeout=0.1), EndOfStream)
    assert isinstance(cap.get_clip(), EndOfStream)  # no timeout: still returns
    assert cap.poll_events()[-1].type == "end"


def _stop_and_time(cap: CaptureThread) -> float:
    cap.stop_event.set()
    start = time.monotonic()
    assert cap.join(2.0)
    return time.monotonic() - start


def test_stop_during_realtime_pacing_joins_within_two_seconds(ten_seconds):
    cap = CaptureThread(CaptureConfig(str(ten_seconds), fps=1.0, realtime=True), threading.Event())
    cap.start()
    assert isinstance(cap.get_clip(timeout=30), Clip)  # after ~4 s of paced playback
    assert _stop_and_time(cap) < 2.0
    items = []
    while not isinstance(item := cap.get_clip(timeout=1), EndOfStream):
        items.append(item)
    assert item.reason == "stopped"


def test_stop_while_decoding_flat_out_into_a_full_queue(ten_seconds):
    cfg = CaptureConfig(str(ten_seconds), fps=10.0, clip_seconds=0.1, loop=True, queue_size=1)
    cap = CaptureThread(cfg, threading.Event())
    cap.start()
    while cap.stats().dropped_clips < 5:
        time.sleep(0.01)
    assert _stop_and_time(cap) < 2.0


def test_nothing_is_left_behind(media, ten_seconds):
    proc = psutil.Process()
    drain(CaptureThread(CaptureConfig(str(ten_seconds), fps=2.0), threading.Event()))  # warm up pools
    native_before = proc.num_threads()
    cap = CaptureThread(CaptureConfig(str(ten_seconds), fps=2.0, loop=True), threading.Event())
    assert str(ten_seconds) in [f.path for f in proc.open_files()]
    cap.start()
    cap.get_clip(timeout=10)
    cap.stop_event.set()
    assert cap.join(2.0)
    assert str(ten_seconds) not in [f.path for f in proc.open_files()]
    assert not [t for t in threading.enumerate() if t.name.startswith("capture[")]
    deadline = time.monotonic() + 5  # an OS thread can outlive its join() by a moment
    while proc.num_threads() > native_before and time.monotonic() < deadline:
        time.sleep(0.05)
    for _ in range(40):  # FFmpeg's decoder threads are gone too (they may take a moment to exit)
        if proc.num_threads() <= native_before:
            break
        time.sleep(0.05)
    assert proc.num_threads() <= native_before


def test_close_without_start_releases_the_source(ten_seconds):
    proc = psutil.Process()
    cap = CaptureThread(CaptureConfig(str(ten_seconds)), threading.Event())
    cap.close()
    assert str(ten_seconds) not in [f.path for f in proc.open_files()]
    assert isinstance(cap.get_clip(timeout=0.1), EndOfStream)
    with pytest.raises(RuntimeError):
        cap.start()


def test_context_manager_starts_and_stops(ten_seconds):
    with CaptureThread(CaptureConfig(str(ten_seconds), fps=2.0), threading.Event()) as cap:
        assert isinstance(cap.get_clip(timeout=10), Clip)
    assert not cap.is_alive()


def test_block_when_full_drops_nothing_for_a_slow_consumer(ten_seconds):
    cap = CaptureThread(
        CaptureConfig(str(ten_seconds), fps=2.0, clip_seconds=1.0, queue_size=1, block_when_full=True),
        threading.Event(),
    )
    cap.start()
    clips = []
    while not isinstance(item := cap.get_clip(timeout=10), EndOfStream):
        clips.append(item)
        time.sleep(0.05)  # slower than the decoder
    assert cap.join(2.0)
    assert [c.index for c in clips] == list(range(len(clips))) and len(clips) >= 9
    assert cap.dropped_clips == 0
