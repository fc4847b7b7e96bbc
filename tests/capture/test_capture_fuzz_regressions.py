"""Hostile files kept from `scripts/fuzz_capture.py` (made by `scripts/make_fuzz_regressions.py`): each ends
in the capture's own `SourceError` with a message naming the file and what to do, or in a clean end of
stream, exactly as asserted here. The first three raised other exception types before they were fixed."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from capture import CaptureConfig, CaptureThread, FrameSampler, SourceError, StreamClock, fit_size, open_source
from tests.support.capture_helpers import drain
from tests.support.in_process_main import run_main

DATA = Path(__file__).parents[1] / "data" / "fuzz"
MAX_SIZE = (448, 448)


def decode(name: str) -> tuple[int, int]:
    """Opens and decodes a file as the capture thread does: (frames decoded, bad packets skipped)."""
    config = CaptureConfig(str(DATA / name), fps=2.0, max_size=MAX_SIZE)
    source = open_source(config)
    clock, sampler, frames = StreamClock(), FrameSampler(config.fps), 0
    try:
        for raw in source.frames():
            frames += 1
            if sampler.offer(clock.map(raw.time)):
                rgb = raw.to_rgb(*fit_size(raw.width, raw.height, MAX_SIZE))
                assert rgb.shape == (48, 64, 3)
        return frames, source.bad_packets
    finally:
        source.close()


def open_error(name: str) -> str:
    with pytest.raises(SourceError) as info:
        decode(name)
    message = str(info.value)
    assert f"file '{DATA / name}'" in message
    return message


def test_metadata_that_is_not_utf8_does_not_stop_the_video():
    assert decode("bad-utf8-metadata.mov") == (4, 0)  # was UnicodeDecodeError from av.open


def test_a_video_stream_without_a_codec_is_a_clear_error():
    message = open_error("no-codec.mp4")  # was AttributeError on a codec context of None
    assert "codec this FFmpeg build cannot decode" in message and "re-encode" in message


def test_a_frame_the_decoder_does_not_implement_is_skipped_and_counted():
    assert decode("unsupported-jpeg-sampling.mov") == (3, 1)  # was PatchWelcomeError mid-stream


def test_the_app_path_reports_the_skipped_frame_and_ends_cleanly():
    config = CaptureConfig(str(DATA / "unsupported-jpeg-sampling.mov"), fps=4.0, clip_seconds=1.0)
    capture = CaptureThread(config, threading.Event())
    out = drain(capture)
    assert out.end.reason == "eof" and len(out.timestamps) == 3
    messages = [e.message for e in capture.poll_events() if e.type == "error"]
    assert any("skipped 1 bad packet" in m for m in messages)


def test_huge_dimensions_in_the_headers():
    # MJPEG carries its size in every frame: 65535x65535 frames are all refused, nothing is allocated
    message = open_error("huge-dims-mjpeg.avi")
    assert "no video frame could be decoded (4 bad packets)" in message
    # MPEG-4 Part 2 takes its size from its own bitstream: the container's claim is ignored
    assert decode("huge-dims-mpeg4.avi") == (4, 0)


def test_truncated_files():
    assert "truncated" in open_error("truncated.mp4")  # mp4's index is at the end
    frames, _ = decode("truncated.mkv")  # Matroska plays up to the cut
    assert 1 <= frames < 12


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("empty.mp4", "the file is empty"),
        ("garbage.webm", "not a video FFmpeg can read"),
        ("header-then-garbage.mkv", "not a video FFmpeg can read, or truncated/corrupt"),  # was a bare "End of file"
        ("truncated-header.mkv", "not a video FFmpeg can read, or truncated/corrupt"),  # was a bare I/O error
    ],
)
def test_empty_and_garbage_files(name, expected):
    assert expected in open_error(name)


def test_the_cli_exits_with_code_2_on_a_hostile_file(capsys):
    code, err = run_main(capsys, "--video", str(DATA / "no-codec.mp4"), "--model", "tiny", "--no-realtime")
    assert code == 2
    assert "codec this FFmpeg build cannot decode" in err and "Traceback" not in err


@pytest.mark.parametrize("takes_it", [True, False])
def test_metadata_errors_goes_only_to_a_pyav_that_takes_it(monkeypatch, takes_it):
    # PyAV 19 (what pip installs on Python 3.12) dropped av.open's metadata_errors: passing it there made every
    # source fail to open (seen on the GPU machine); PyAV before 19 needs it for metadata that is not UTF-8
    from capture import av_source

    calls = []
    monkeypatch.setattr(av_source, "_TAKES_METADATA_ERRORS", takes_it)
    monkeypatch.setattr(av_source.av, "open", lambda target, **kwargs: calls.append(kwargs) or "container")
    assert av_source._open_container("clip.mp4", {}, {}, 5.0) == "container"
    assert ("metadata_errors" in calls[0]) is takes_it
    assert calls[0]["mode"] == "r" and calls[0]["timeout"] == 5.0
