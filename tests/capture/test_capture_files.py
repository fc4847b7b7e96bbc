"""Video files decoded for real: codecs, containers, odd sizes, variable frame rate, clips, looping,
pacing. Each test video carries its frame index in a pixel strip, so a sampled frame can be checked
against its timestamp."""

from __future__ import annotations

import threading
import time

import pytest

from capture import CaptureConfig, CaptureThread, Clip
from capture.synth import read_marker
from tests.support.capture_helpers import Media, drain


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    return Media(tmp_path_factory.mktemp("capture_media"))


def capture(path, **kwargs) -> CaptureThread:
    return CaptureThread(CaptureConfig(str(path), **kwargs), threading.Event())


def check_frames_match_times(clips: list[Clip], src_times: list[float]):
    """Each sampled frame shows the source frame its timestamp names (marker strip)."""
    for clip in clips:
        for frame, t in zip(clip.frames, clip.timestamps, strict=True):
            index = read_marker(frame)
            assert src_times[index] == pytest.approx(t, abs=1e-3), (index, t)


@pytest.mark.parametrize(
    "name, codec, size",
    [
        ("h264.mp4", "libx264", (320, 240)),
        ("hevc.mkv", "libx265", (320, 240)),
        ("vp9.webm", "libvpx-vp9", (320, 240)),
        ("mjpeg.avi", "mjpeg", (641, 359)),
        ("mpeg4.mov", "mpeg4", (320, 240)),
        ("h264_odd.mp4", "libx264", (641, 359)),
    ],
)
def test_codecs_and_containers_sample_on_the_fps_grid(media, name, codec, size):
    path, src_times = media.video_and_times(name, codec, size, fps=30, duration_s=3.0)
    out = drain(capture(path, fps=2.0, clip_seconds=1.0, max_size=(160, 160)))
    assert out.end.reason == "eof"
    times = out.timestamps
    assert len(times) == 6
    for k, t in enumerate(times):  # within one source frame interval of the requested grid
        assert k / 2.0 - 1e-6 <= t < k / 2.0 + 1 / 30
    w, h = size
    expected = (160, round(h * 160 / w))
    for clip in out.clips:
        assert clip.frames.dtype.name == "uint8" and clip.frames.shape[1:] == (expected[1], expected[0], 3)
    check_frames_match_times(out.clips, src_times)


def test_colors_come_out_as_rgb(media):
    # scene 0 has a blue background (40, 60, 160) in RGB: check the channel order.
    path = media.video("rgb.mp4", "libx264", (320, 240), fps=10, duration_s=1.0, marker=False)
    clip = drain(capture(path, fps=1.0, clip_seconds=1.0)).clips[0]
    r, g, b = clip.frames[0, 60:80, 280:300].reshape(-1, 3).mean(axis=0)
    assert b > r + 60 and b > g + 60


def test_variable_frame_rate_sampled_by_timestamp(media):
    # bursts at 60 fps, then 4 fps, then 30 fps: frame counts would give wrong times
    vfr = [i / 60 for i in range(120)] + [2 + i / 4 for i in range(12)] + [5 + i / 30 for i in range(90)]
    path, src_times = media.video_and_times("vfr.mkv", "libx264", (320, 240), fps=30, frame_times=vfr)
    out = drain(capture(path, fps=2.0, clip_seconds=2.0))
    times = out.timestamps
    assert len(times) == 16
    for k, t in enumerate(times):
        nxt = min((s for s in src_times if s >= k / 2.0 - 1e-6), default=None)
        assert t == pytest.approx(nxt, abs=1e-3)  # the first source frame at or after each grid point
    check_frames_match_times(out.clips, src_times)


def test_clip_boundaries_and_counts(media):
    path = media.video("clips.mp4", "libx264", (320, 240), fps=25, duration_s=9.0)
    out = drain(capture(path, fps=1.0, clip_seconds=4.0))
    assert [c.index for c in out.clips] == [0, 1, 2]
    assert [len(c.timestamps) for c in out.clips] == [4, 4, 1]  # the last clip is partial
    assert [(c.t_start, c.t_end) for c in out.clips[:2]] == [(0.0, 4.0), (4.0, 8.0)]
    assert out.clips[2].t_start == 8.0 and out.clips[2].t_end == pytest.approx(9.0)
    for clip in out.clips:
        assert all(clip.t_start <= t < clip.t_end for t in clip.timestamps)
        assert clip.frames.shape[0] == len(clip.timestamps)


def test_loop_keeps_stream_time_increasing(media):
    path, src_times = media.video_and_times("loop.mp4", "libx264", (160, 120), fps=10, duration_s=2.0)
    cap = capture(path, fps=2.0, clip_seconds=1.0, loop=True)
    cap.start()
    clips = []
    while len(clips) < 7:  # 3.5 loops of 2 s
        clip = cap.get_clip(timeout=10)
        assert isinstance(clip, Clip)
        clips.append(clip)
    cap.stop_event.set()
    assert cap.join(2.0)
    times = [t for c in clips for t in c.timestamps]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert times[-1] > 6.0
    markers = [read_marker(f) for c in clips for f in c.frames]
    assert markers[:4] == [0, 5, 10, 15] and markers[4:8] == [0, 5, 10, 15]  # it restarted


def test_realtime_pacing_follows_stream_time(media):
    path = media.video("paced.mp4", "libx264", (160, 120), fps=10, duration_s=1.5)
    cap = capture(path, fps=4.0, clip_seconds=0.5, realtime=True)
    start = time.monotonic()
    out = drain(cap)
    elapsed = time.monotonic() - start
    assert len(out.timestamps) == 6
    # the last sampled frame (t = 1.25 s) cannot be delivered before 1.25 s of wall time
    assert elapsed >= out.timestamps[-1] - 0.05
    delays = [c.wall_time - out.clips[0].wall_time for c in out.clips]
    assert delays == sorted(delays)


def test_no_resize_without_max_size(media):
    path = media.video("full.avi", "mjpeg", (641, 359), fps=10, duration_s=1.0)
    out = drain(capture(path, fps=1.0, clip_seconds=1.0))
    assert out.clips[0].frames.shape == (1, 359, 641, 3)
