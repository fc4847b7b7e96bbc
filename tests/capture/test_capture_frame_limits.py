"""Extreme frame shapes and sizes never reach the model (issue 39): a 4096x16 video shrank to 448x2 for the model,
and a source of any resolution was decoded whole. A video source beyond 20:1 or 8K UHD's pixel count is refused
at open with a message naming its size and the bound (capture.frame_limits); normal shapes still open."""

from __future__ import annotations

import threading

import pytest

from capture import CaptureConfig, CaptureThread, SourceError, open_source
from tests.support.capture_helpers import Media, drain


@pytest.fixture(scope="module")
def media(tmp_path_factory) -> Media:
    return Media(tmp_path_factory.mktemp("frame-limits"))


@pytest.mark.parametrize("size", [(4096, 16), (16, 4096), (2048, 64)])
def test_an_extreme_aspect_ratio_is_refused_at_open(media, size) -> None:
    video = media.video(f"{size[0]}x{size[1]}.mkv", "libx264", size, fps=4, duration_s=1.0)
    with pytest.raises(SourceError, match=rf"{size[0]}x{size[1]}, an aspect ratio of \d+:1, beyond the 20:1"):
        open_source(CaptureConfig(video))


def test_a_source_over_8k_pixels_is_refused_at_open(media) -> None:
    video = media.video("big.mkv", "mjpeg", (8192, 4352), fps=1, duration_s=1.0, marker=False)
    with pytest.raises(SourceError, match=r"8192x4352 = 35,651,584 pixels, more than the 33,177,600 allowed"):
        open_source(CaptureConfig(video))


def test_the_bounds_are_settings(media) -> None:
    video = media.video("wide.mkv", "libx264", (640, 32), fps=4, duration_s=1.0)
    with pytest.raises(SourceError, match="beyond the 10:1"):
        open_source(CaptureConfig(video, max_aspect_ratio=10.0))
    with pytest.raises(SourceError, match="more than the 10,000 allowed"):
        open_source(CaptureConfig(video, max_source_pixels=10_000))


def test_shapes_within_the_bounds_reach_the_model_fitted(media) -> None:
    video = media.video("wide.mkv", "libx264", (640, 32), fps=4, duration_s=1.0)  # 20:1 exactly
    config = CaptureConfig(video, fps=4, clip_seconds=1.0, max_size=(448, 448))
    drained = drain(CaptureThread(config, threading.Event()))
    assert drained.end.reason == "eof"
    assert {clip.frames.shape[1:] for clip in drained.clips} == {(22, 448, 3)}


def test_a_stream_that_turns_extreme_midway_ends_with_the_error(media, tmp_path) -> None:
    normal = media.video("normal.ts", "libx264", (64, 48), fps=4, duration_s=8.0)  # past what FFmpeg probes
    extreme = media.video("extreme.ts", "libx264", (4096, 16), fps=4, duration_s=1.0)
    joined = tmp_path / "joined.ts"
    joined.write_bytes(normal.read_bytes() + extreme.read_bytes())  # MPEG-TS: the resolution changes mid-file
    drained = drain(CaptureThread(CaptureConfig(joined, fps=4, clip_seconds=0.5), threading.Event()))
    assert drained.clips and {clip.frames.shape[1:3] for clip in drained.clips} == {(48, 64)}
    assert drained.end.reason == "error" and "4096x16, an aspect ratio of 256:1" in drained.end.message
