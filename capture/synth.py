"""Synthetic videos, rendered with OpenCV drawing and encoded with PyAV: for tests, benchmarks, demos.

Each frame shows a scene (background, a moving shape, optionally a caption) that changes every ``scene_seconds``,
and optionally a strip of black/white blocks at the top encoding the frame index in binary, so a test
can read back which source frame a sampled frame came from (``read_marker``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np

from capture.scenes import BACKGROUNDS, COLOURS, DEMO_SCENES, Thing, describe, draw_thing

logger = logging.getLogger(__name__)

MARKER_BITS = 12
# (caption, background RGB, shape, shape RGB): the generated scenes' five demo scenes, in their words
SCENES = tuple(
    (describe([Thing(kind, colour, 0.0, 1.0)], background), BACKGROUNDS[background], kind, COLOURS[colour])
    for background, kind, colour in DEMO_SCENES
)
_QUIET = {"libx265": {"x265-params": "log-level=error"}}


def scene_caption(t: float, scene_seconds: float) -> str:
    """The caption of the scene shown at time ``t`` seconds."""
    return SCENES[int(t // scene_seconds) % len(SCENES)][0]


def _marker_geometry(width: int, height: int) -> tuple[int, int]:
    """(block width, strip height) in pixels of the frame-index strip."""
    return width // MARKER_BITS, max(4, height // 8)


def draw_marker(img: np.ndarray, index: int) -> None:
    """Write ``index`` (modulo 2**MARKER_BITS) as black/white blocks across the top of ``img`` in place."""
    height, width = img.shape[:2]
    block, strip = _marker_geometry(width, height)
    for bit in range(MARKER_BITS):
        value = 255 if (index >> (MARKER_BITS - 1 - bit)) & 1 else 0
        img[:strip, bit * block : (bit + 1) * block] = value


def read_marker(img: np.ndarray) -> int:
    """Read back the index written by ``draw_marker`` (works after resizing and lossy coding)."""
    height, width = img.shape[:2]
    block, strip = _marker_geometry(width, height)
    index = 0
    for bit in range(MARKER_BITS):
        patch = img[strip // 4 : 3 * strip // 4, bit * block + block // 4 : (bit + 1) * block - block // 4]
        index = (index << 1) | int(patch.mean() > 127)
    return index


def make_texture(width: int, height: int, seed: int = 0) -> np.ndarray:
    """A ``[height, width]`` int16 zero-mean grain pattern (blurred noise), like camera detail."""
    rng = np.random.default_rng(seed)
    noise = rng.integers(0, 256, (height, width), dtype=np.uint8)
    return cv2.GaussianBlur(noise, (0, 0), 1.5).astype(np.int16) - 128


def render_frame(
    index: int,
    t: float,
    width: int,
    height: int,
    scene_seconds: float = 5.0,
    marker: bool = False,
    texture: np.ndarray | None = None,
    caption: bool = True,
) -> np.ndarray:
    """One ``[height, width, 3]`` uint8 RGB frame of the synthetic scene at time ``t`` seconds.

    ``texture`` (from ``make_texture``) adds moving detail, so encoded files have a realistic bitrate.
    ``caption``: the scene's words and the time written along the bottom (for a person watching).
    """
    words, background, _, _ = SCENES[int(t // scene_seconds) % len(SCENES)]
    img = np.empty((height, width, 3), np.uint8)
    img[:] = background
    if texture is not None:
        shifted = np.roll(texture, (int(t * 40), int(t * 90)), axis=(0, 1))[..., None]
        img[:] = np.clip(img.astype(np.int16) + shifted, 0, 255).astype(np.uint8)
    # drawn as the demo model's training frames draw it (capture/scenes.py): only a ball bounces
    number = int(t // scene_seconds)
    _, kind, colour = DEMO_SCENES[number % len(DEMO_SCENES)]
    draw_thing(img, Thing(kind, colour, number * scene_seconds, (number + 1) * scene_seconds), t)
    if caption:
        scale = max(0.3, height / 720)
        thickness = max(1, int(2 * scale))
        text = f"{words}  t={t:5.1f}s"
        cv2.putText(img, text, (10, height - 12), cv2.FONT_HERSHEY_SIMPLEX, scale, (255, 255, 255), thickness)
    if marker:
        draw_marker(img, index)
    return img


def default_pix_fmt(codec: str, width: int, height: int) -> str:
    """A pixel format ``codec`` accepts at this size (4:2:0 needs even sizes for most encoders)."""
    if codec == "mjpeg":
        return "yuvj420p"
    if width % 2 or height % 2:
        return "yuv444p"
    return "yuv420p"


def write_video(
    path: str | Path,
    codec: str = "libx264",
    size: tuple[int, int] = (320, 240),
    fps: float = 30.0,
    duration_s: float = 2.0,
    frame_times: Sequence[float] | None = None,
    pix_fmt: str | None = None,
    options: dict[str, str] | None = None,
    container_format: str | None = None,
    scene_seconds: float = 5.0,
    marker: bool = True,
    textured: bool = False,
    caption: bool = True,
    progress: Callable[[int], object] | None = None,
) -> list[float]:
    """Encode a synthetic video; returns the presentation time of each frame written, seconds.

    Args:
        path: output file; the container follows the extension unless ``container_format`` is given.
        codec: PyAV encoder name (libx264, libx265, libvpx-vp9, mjpeg, mpeg4, ...).
        size: ``(width, height)`` in pixels (odd sizes get yuv444p unless ``pix_fmt`` says otherwise).
        fps: nominal frame rate, frames per second (constant unless ``frame_times`` is given).
        duration_s: seconds of video at ``fps`` when ``frame_times`` is None.
        frame_times: explicit increasing presentation times in seconds (variable frame rate).
        options: encoder options (e.g. ``{"preset": "ultrafast"}``).
        marker: draw the frame index strip (see ``read_marker``).
        textured: add moving grain (realistic bitrate and decode cost; used for benchmarks and demos).
        caption: write each scene's words and the time along the bottom (`render_frame`).
        progress: called with 1 after each frame is encoded (e.g. ``tqdm.update``).
    """
    width, height = size
    if frame_times is None:
        count = max(1, round(duration_s * fps))
        rate = Fraction(fps).limit_denominator(1001)
        time_base = 1 / rate
        pts = list(range(count))
    else:
        time_base = Fraction(1, 90000)
        pts = [round(t * 90000) for t in frame_times]
        rate = Fraction(fps).limit_denominator(1001)
    opts = {**_QUIET.get(codec, {}), **(options or {})}
    times: list[float] = []
    texture = make_texture(width, height) if textured else None
    with av.open(str(path), mode="w", format=container_format) as container:
        stream = container.add_stream(codec, rate=rate, options=opts)
        stream.width, stream.height = width, height
        stream.pix_fmt = pix_fmt or default_pix_fmt(codec, width, height)
        stream.codec_context.time_base = time_base
        for i, p in enumerate(pts):
            t = float(p * time_base)
            img = render_frame(i, t, width, height, scene_seconds, marker, texture, caption)
            frame = av.VideoFrame.from_ndarray(img, format="rgb24")
            frame.pts = p
            frame.time_base = time_base
            times.append(t)
            for packet in stream.encode(frame):
                container.mux(packet)
            if progress is not None:
                progress(1)
        for packet in stream.encode():
            container.mux(packet)
    logger.debug("wrote %s: %s %dx%d, %d frames", path, codec, width, height, len(times))
    return times
