"""The frame sizes a decoded source may have: `check_frame_size`.

A file or stream decides its own resolution. One of 16384x16384 costs the decoder hundreds of megabytes a
frame before it is downscaled; one of 4096x16 shrinks to a sliver of a pixel or two that a vision model cannot
read (some processors raise on it). So a video source (PyAV: files, uploads, URLs) whose frames exceed
``max_pixels`` or whose aspect ratio is beyond ``max_aspect_ratio`` is refused: at open, by its header and its
first frame, and later by any frame whose size changes past the bounds (the stream ends with that error).
Cameras are configured by the operator and give what their hardware gives; they are not checked.
"""

from __future__ import annotations

from capture.errors import SourceError

MAX_SOURCE_PIXELS = 7680 * 4320  # 8K UHD: the largest cameras and video formats in use
MAX_ASPECT_RATIO = 20.0  # wider than any panoramic camera (360-degree strips are about 6:1)


def frame_size_problem(width: int, height: int, max_pixels: int, max_aspect_ratio: float) -> str | None:
    """Why a `width` x `height` frame is refused, or None when it is within the bounds."""
    if width < 1 or height < 1:
        return f"its frames are {width}x{height} pixels (empty)"
    if width * height > max_pixels:
        return (
            f"its frames are {width}x{height} = {width * height:,} pixels, more than the {max_pixels:,} allowed "
            "(8K UHD is 7680x4320); downscale the video or give the camera's lower-resolution stream"
        )
    ratio = max(width / height, height / width)
    if ratio > max_aspect_ratio:
        return (
            f"its frames are {width}x{height}, an aspect ratio of {ratio:.0f}:1, beyond the {max_aspect_ratio:g}:1 "
            "allowed (the model would see a sliver of pixels); crop or pad the video to a normal shape"
        )
    return None


def check_frame_size(description: str, width: int, height: int, max_pixels: int, max_aspect_ratio: float) -> None:
    """Raises SourceError naming `description`, the size and the bound when the frame size is refused."""
    problem = frame_size_problem(width, height, max_pixels, max_aspect_ratio)
    if problem is not None:
        raise SourceError(f"cannot use {description}: {problem}")
