"""Bad input: each failure names the source and what to try; opening errors come before any thread;
mid-stream problems become events and an EndOfStream, never an exception in the consumer."""

from __future__ import annotations

import threading

import av
import numpy as np
import pytest

from capture import CaptureConfig, CaptureThread, RawFrame, ReconnectPolicy, SourceError, open_source
from capture.camera_source import CameraSource
from tests.support.capture_helpers import Media, drain, overwrite


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    return Media(tmp_path_factory.mktemp("capture_bad_media"))


def open_error(source, **kwargs) -> str:
    threads_before = threading.active_count()
    with pytest.raises(SourceError) as info:
        CaptureThread(CaptureConfig(source, **kwargs), threading.Event())
    assert threading.active_count() == threads_before  # failed before any thread started
    return str(info.value)


def test_missing_path(tmp_path):
    msg = open_error(str(tmp_path / "nope.mp4"))
    assert "nope.mp4" in msg and "no such file" in msg and "check the path" in msg


def test_directory_and_empty_file(media, tmp_path):
    assert "directory" in open_error(str(tmp_path))
    assert "empty" in open_error(str(media.file("empty.mp4", b"")))


def test_file_that_is_not_video(media):
    path = media.file("notes.mp4", b"just some text, not a video\n" * 200)
    msg = open_error(str(path))
    assert "notes.mp4" in msg and "not a video" in msg


def test_audio_only_file_has_no_video_stream(media):
    path = media.root / "tone.wav"
    with av.open(str(path), "w") as out:
        stream = out.add_stream("pcm_s16le", rate=8000)
        samples = (np.sin(np.arange(8000) / 5) * 3000).astype(np.int16)[None, :]
        frame = av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
        frame.sample_rate = 8000
        for packet in stream.encode(frame):
            out.mux(packet)
    msg = open_error(str(path))
    assert "no video stream" in msg and "audio" in msg


def test_truncated_mp4_fails_at_open_with_advice(media):
    data = media.video("whole.mp4", "libx264", (320, 240), fps=30, duration_s=2.0).read_bytes()
    path = media.file("cut.mp4", data[: len(data) // 2])
    msg = open_error(str(path))
    assert "cut.mp4" in msg and "truncated" in msg


@pytest.mark.parametrize("name", ["cut.mkv", "cut.ts"])
def test_truncated_stream_files_play_up_to_the_cut(media, name):
    full = media.video("whole_" + name, "libx264", (320, 240), fps=30, duration_s=4.0)
    data = full.read_bytes()
    path = media.file(name, data[: len(data) * 2 // 3])
    out = drain(CaptureThread(CaptureConfig(str(path), fps=2.0, clip_seconds=1.0), threading.Event()))
    assert out.end.reason == "eof"
    assert 1.0 <= out.timestamps[-1] < 3.5


@pytest.mark.parametrize("name", ["spots.mp4", "spots.ts"])
def test_corrupt_packets_are_skipped_and_counted(media, name):
    full = media.video("clean_" + name, "libx264", (320, 240), fps=30, duration_s=4.0, options={"g": "15"})
    data = full.read_bytes()
    n = len(data)
    path = media.file(name, overwrite(data, [n // 3, n // 2, 2 * n // 3], 400))
    cap = CaptureThread(CaptureConfig(str(path), fps=2.0, clip_seconds=1.0), threading.Event())
    out = drain(cap)
    assert out.end.reason == "eof"
    assert out.timestamps[-1] >= 3.0  # decoding went on past the damage
    assert cap.stats().bad_packets >= 1
    events = cap.poll_events()
    assert any(e.type == "error" and "bad packet" in e.message and name in e.message for e in events)
    assert events[-1].type == "end"


def test_unreadable_rest_of_file_ends_with_an_error_event(media):
    data = media.video("clean_half.mp4", "libx264", (320, 240), fps=30, duration_s=4.0).read_bytes()
    path = media.file("half.mp4", overwrite(data, [len(data) // 2], len(data) // 2 - 2000))
    cfg = CaptureConfig(str(path), fps=2.0, clip_seconds=1.0, max_consecutive_errors=5)
    cap = CaptureThread(cfg, threading.Event())
    out = drain(cap)
    assert out.end.reason == "error" and "unreadable" in out.end.message
    assert out.clips  # what was readable was delivered
    assert [e.type for e in cap.poll_events()][-2:] == ["error", "end"]


def test_camera_that_does_not_exist():
    msg = open_error(97)
    assert "camera 97" in msg and "/dev/video97" in msg


def test_gstreamer_without_gstreamer_support_or_bad_pipeline():
    msg = open_error("gst:this-element-does-not-exist ! appsink")
    assert "GStreamer" in msg


def test_unsupported_url_scheme_is_a_value_error():
    with pytest.raises(ValueError, match="allowed"):
        CaptureConfig("gopher://example.com/video")


class FakeCam:
    """Stands in for cv2.VideoCapture: ``frames`` BGR frames, then read() fails (unplugged)."""

    def __init__(self, frames: int, opened: bool = True) -> None:
        self.left, self.opened, self.released = frames, opened, False

    def isOpened(self) -> bool:  # noqa: N802 - OpenCV's name
        return self.opened

    def read(self):
        if self.left <= 0:
            return False, None
        self.left -= 1
        img = np.zeros((48, 64, 3), np.uint8)
        img[..., 0] = 255  # blue in BGR
        return True, img

    def set(self, *args) -> bool:
        return True

    def release(self) -> None:
        self.released = True


def test_camera_frames_are_rgb_and_resized_and_a_drop_is_reconnected():
    cams = [FakeCam(6), FakeCam(6)]
    made = []

    def factory(target, api):
        made.append(cams[len(made)] if len(made) < len(cams) else FakeCam(0, opened=False))
        return made[-1]

    policy = ReconnectPolicy(initial_delay_s=0.01, max_delay_s=0.02, max_attempts=2)
    cfg = CaptureConfig(0, fps=240.0, clip_seconds=1.0, max_size=(32, 32), queue_size=100, reconnect=policy)
    opener = lambda c: CameraSource.open(c, factory)  # noqa: E731
    cap = CaptureThread(cfg, threading.Event(), opener=opener)
    out = drain(cap)
    frames = np.concatenate([c.frames for c in out.clips])
    assert frames.shape[1:] == (24, 32, 3)
    assert (frames[..., 2] == 255).all() and (frames[..., 0] == 0).all()  # BGR blue became RGB blue
    assert cap.stats().reconnects == 1
    assert out.end.reason == "error" and "gave up" in out.end.message
    assert all(cam.released for cam in made)
    events = [e.type for e in cap.poll_events()]
    assert events == ["reconnect", "reconnected", "reconnect", "error", "end"]  # drop, back, drop, gave up


class ExplodingSource:
    """A source whose decoder raises an unexpected error mid-stream."""

    description = "exploding test source"
    is_live = False
    bad_packets = 0

    def __init__(self) -> None:
        self.closed = False

    def frames(self):
        for i in range(3):
            yield RawFrame(i * 0.5, 8, 8, lambda w, h: np.zeros((h, w, 3), np.uint8))
        raise RuntimeError("decoder exploded")

    def close(self) -> None:
        self.closed = True


def test_unexpected_mid_stream_failure_becomes_an_event_not_a_crash():
    source = ExplodingSource()
    cap = CaptureThread(CaptureConfig("x.mp4", fps=2.0, clip_seconds=1.0), threading.Event(), source=source)
    out = drain(cap)
    assert out.end.reason == "error" and "decoder exploded" in out.end.message
    assert [c.timestamps for c in out.clips] == [[0.0, 0.5], [1.0]]  # frames before the failure arrive
    assert source.closed
    assert any(e.type == "error" and "exploded" in e.message for e in cap.poll_events())


def test_open_source_decodes_the_first_frame(media):
    path = media.video("first.mp4", "libx264", (320, 240), fps=30, duration_s=1.0)
    source = open_source(CaptureConfig(str(path)))
    try:
        first = next(iter(source.frames()))
        assert (first.width, first.height) == (320, 240) and first.time == 0.0
    finally:
        source.close()
