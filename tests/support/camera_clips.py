"""A fixed camera for the change tests: a real photo (matplotlib's sample image) as the scene, sensor noise,
exposure drift and a flickering light, encoded with H.264 (PyAV, libx264) at a camera-like bitrate and decoded
again; optionally a dark object crossing part of the frame, with its box per frame as ground truth."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np
from matplotlib import cbook
from PIL import Image

WIDTH, HEIGHT = 448, 336
OBJECT = 64  # px, side of the moving object


@dataclass(frozen=True)
class Light:
    """A patch of the scene that shows `before` until `switch_s` seconds and `after` from then on (RGB, 0..255),
    lit like the rest of the scene (exposure drift and flicker apply to it): a traffic light, a status lamp."""

    box: tuple[int, int, int, int]  # (x0, y0, x1, y1) px
    before: tuple[int, int, int]
    after: tuple[int, int, int]
    switch_s: float


@dataclass
class CameraVideo:
    frames: np.ndarray  # [N, H, W, 3] uint8, sampled at 1 frame per second of stream time
    boxes: list[tuple[int, int, int, int] | None]  # the object's (x0, y0, x1, y1) in each frame, or None


def scene() -> np.ndarray:
    """[HEIGHT, WIDTH, 3] uint8: a real photograph."""
    with cbook.get_sample_data("grace_hopper.jpg") as f:
        image = Image.open(f).convert("RGB")
    return np.asarray(image.resize((WIDTH, HEIGHT), Image.BILINEAR))


def camera_video(
    seconds: int,
    moving: tuple[int, int] | None = None,
    fps: int = 5,
    bitrate: int = 400_000,
    noise: float = 4.0,
    drift: float = 0.12,
    flicker: float = 0.03,
    seed: int = 0,
    path: Path | None = None,
    light: Light | None = None,
) -> CameraVideo:
    """`seconds` of a fixed camera, sampled at 1 fps after an H.264 round trip at `fps` and `bitrate` (bit/s).

    noise: sensor noise sigma (gray levels); drift: exposure gain change over the whole video; flicker: gain
    swing of a light flickering from frame to frame; moving: (first, last) second the object crosses the frame;
    path: also keep the encoded video there (an .mp4 file); light: a patch that changes colour once."""
    rng = np.random.default_rng(seed)
    base = scene().astype(np.float32)
    n = seconds * fps
    boxes: list[tuple[int, int, int, int] | None] = []
    buffer = io.BytesIO()
    with av.open(buffer if path is None else str(path), "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        stream.bit_rate = bitrate
        stream.options = {"preset": "veryfast", "g": str(2 * fps)}
        for i in range(n):
            gain = 1.0 + drift * i / max(n - 1, 1) + flicker * (1 if i % 2 else -1)
            lit = base
            if light is not None:
                x0, y0, x1, y1 = light.box
                lit = base.copy()
                lit[y0:y1, x0:x1] = light.before if i / fps < light.switch_s else light.after
            img = lit * gain + rng.normal(0.0, noise, base.shape)
            box = _box(i / fps, moving)
            if box is not None:
                x0, y0, x1, y1 = box
                img[y0:y1, x0:x1] = (30.0, 40.0, 200.0)
            boxes.append(box)
            frame = av.VideoFrame.from_ndarray(np.clip(img, 0, 255).astype(np.uint8), format="rgb24")
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    buffer.seek(0)
    with av.open(buffer if path is None else str(path)) as container:
        decoded = [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]
    frames = np.stack(decoded[::fps])
    return CameraVideo(frames, boxes[::fps])


def _box(t: float, moving: tuple[int, int] | None) -> tuple[int, int, int, int] | None:
    """The object's box at time t: it moves left to right across the middle third, (first, last) seconds."""
    if moving is None or not moving[0] <= t <= moving[1]:
        return None
    share = (t - moving[0]) / max(moving[1] - moving[0], 1)
    x0 = int(share * (WIDTH - OBJECT))
    y0 = HEIGHT // 2 - OBJECT // 2
    return x0, y0, x0 + OBJECT, y0 + OBJECT
