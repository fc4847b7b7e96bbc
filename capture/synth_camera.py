"""Fixed-camera test videos: a real photo as the scene, sensor noise, exposure drift, a flickering light,
optionally one object crossing part of the frame, encoded H.264 at a camera-like bitrate with PyAV.

They behave like what the assistant mostly watches (a door, a yard, a shop floor): the same pixels for
minutes, plus what a real camera adds to them, so a change detector can be checked against false
positives (noise, drift, flicker, compression) and against misses (the object's ground-truth box).

    write_camera_video("static.mp4", CameraVideoConfig(duration_s=20))
    boxes = write_camera_video("moving.mp4", CameraVideoConfig(object_enter_s=6, object_exit_s=14))

The object's box per frame (pixels of the video, None when it is out of view) is returned and written by
``write_boxes`` as JSON next to the video (``<video>.boxes.json``); ``load_boxes`` reads it back and
``box_at`` gives the box shown at a stream time.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from fractions import Fraction
from pathlib import Path

import av
import cv2
import numpy as np

logger = logging.getLogger(__name__)

SCENES = ("grace_hopper",)  # photos matplotlib ships (sample_data); no extra dependency
Box = tuple[int, int, int, int]  # x0, y0, x1, y1 in pixels, exclusive ends


@dataclass(frozen=True)
class CameraVideoConfig:
    """What the fixed camera sees and how it records it.

    Noise and drift are in 8-bit levels (0..255) of the frame before encoding. ``flicker_depth`` is the
    relative brightness swing of a light on mains power (``flicker_hz``: 100 for 50 Hz mains, 120 for 60 Hz),
    sampled at the frame times, so it aliases at the frame rate as in a real camera; ``rolling_shutter_s``
    > 0 reads the rows out over that many seconds, which turns the flicker into bands that roll down.
    """

    size: tuple[int, int] = (640, 480)  # (width, height), pixels
    fps: float = 10.0
    duration_s: float = 20.0
    scene: str = "grace_hopper"
    noise_sigma: float = 2.5  # Gaussian read/shot noise per pixel, levels (a decent camera in good light)
    drift: float = 0.04  # exposure (gain) swing, relative: gain = 1 + drift * sin(2 pi t / drift_period_s)
    drift_period_s: float = 60.0
    flicker_depth: float = 0.0  # 0 = no flickering light; 0.05 = +-5 % brightness
    flicker_hz: float = 99.96  # mains is never exactly 50 Hz: the light's 100 Hz beats against the frame rate
    rolling_shutter_s: float = 0.0
    object_enter_s: float | None = None  # an object crosses the frame between these times (None: static)
    object_exit_s: float | None = None
    object_size: float = 0.25  # the object's height as a share of the frame height
    object_lane: float = 0.6  # the vertical centre of its path, as a share of the frame height
    bitrate: int = 1_000_000  # bits/s: what an IP camera spends on 640x480 at 10 fps
    gop_s: float = 2.0  # seconds between the encoder's key frames (IP cameras: 1-4 s)
    codec: str = "libx264"
    seed: int = 0

    def __post_init__(self) -> None:
        width, height = self.size
        if width < 32 or height < 32 or width % 2 or height % 2:
            raise ValueError(f"size must be even and at least 32x32, got {width}x{height}")
        if self.fps <= 0 or self.duration_s <= 0:
            raise ValueError(f"fps and duration_s must be > 0, got {self.fps} and {self.duration_s}")
        if self.scene not in SCENES:
            raise ValueError(f"scene must be one of {', '.join(SCENES)}, got {self.scene!r}")
        if self.noise_sigma < 0 or not 0 <= self.drift < 1 or not 0 <= self.flicker_depth < 1:
            raise ValueError("noise_sigma must be >= 0, drift and flicker_depth in [0, 1)")
        if self.drift_period_s <= 0 or self.flicker_hz <= 0 or self.rolling_shutter_s < 0:
            raise ValueError("drift_period_s and flicker_hz must be > 0, rolling_shutter_s >= 0")
        if (self.object_enter_s is None) != (self.object_exit_s is None):
            raise ValueError("object_enter_s and object_exit_s go together (both None: a static scene)")
        if self.object_enter_s is not None and not 0 <= self.object_enter_s < self.object_exit_s:
            times = f"{self.object_enter_s}, {self.object_exit_s}"
            raise ValueError(f"need 0 <= object_enter_s < object_exit_s, got {times}")
        if not 0.05 <= self.object_size <= 0.9 or not 0 <= self.object_lane <= 1:
            raise ValueError("object_size must be in [0.05, 0.9] and object_lane in [0, 1]")
        if self.bitrate < 10_000 or self.gop_s <= 0:
            raise ValueError(f"bitrate must be >= 10000 bits/s and gop_s > 0, got {self.bitrate}, {self.gop_s}")

    @property
    def moving(self) -> bool:
        return self.object_enter_s is not None


def load_scene(name: str, size: tuple[int, int]) -> np.ndarray:
    """The photo ``name`` cropped to the aspect of ``size`` (centre) and resized: ``[height, width, 3]`` uint8 RGB."""
    from matplotlib import cbook  # imported here: only the scene needs it

    if name not in SCENES:
        raise ValueError(f"scene must be one of {', '.join(SCENES)}, got {name!r}")
    with cbook.get_sample_data(f"{name}.jpg") as f:
        data = np.frombuffer(f.read(), np.uint8)
    img = cv2.cvtColor(cv2.imdecode(data, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
    width, height = size
    src_h, src_w = img.shape[:2]
    scale = max(width / src_w, height / src_h)
    crop_w, crop_h = round(width / scale), round(height / scale)
    x0, y0 = (src_w - crop_w) // 2, (src_h - crop_h) // 2
    crop = img[y0 : y0 + crop_h, x0 : x0 + crop_w]
    return cv2.resize(crop, (width, height), interpolation=cv2.INTER_AREA)


def _unclipped_box(config: CameraVideoConfig, t: float) -> Box | None:
    """The object's full box at ``t`` seconds, possibly beyond the frame's edges; None outside its time."""
    if not config.moving or not config.object_enter_s <= t < config.object_exit_s:
        return None
    width, height = config.size
    obj_h = max(4, round(config.object_size * height))
    obj_w = max(4, round(obj_h * 0.6))
    u = (t - config.object_enter_s) / (config.object_exit_s - config.object_enter_s)
    x0 = round(-obj_w + u * (width + obj_w))
    y0 = round(config.object_lane * height - obj_h / 2)
    return x0, y0, x0 + obj_w, y0 + obj_h


def object_box(config: CameraVideoConfig, t: float) -> Box | None:
    """Where the crossing object is at ``t`` seconds (pixels, clipped to the frame), None when out of view.

    It enters at the left edge at ``object_enter_s`` and has left at the right edge by ``object_exit_s``,
    at a constant speed, along a horizontal lane.
    """
    full = _unclipped_box(config, t)
    if full is None:
        return None
    width, height = config.size
    box = (max(0, full[0]), max(0, full[1]), min(width, full[2]), min(height, full[3]))
    return box if box[2] > box[0] and box[3] > box[1] else None


def _draw_object(img: np.ndarray, box_unclipped: tuple[int, int, int, int]) -> None:
    """A person-like figure (head, body, legs) with a patterned coat, so it has texture, in place."""
    x0, y0, x1, y1 = box_unclipped
    w, h = x1 - x0, y1 - y0
    cx = (x0 + x1) // 2
    head = max(2, w // 4)
    cv2.circle(img, (cx, y0 + head), head, (200, 160, 130), -1, cv2.LINE_AA)
    body = (x0, y0 + 2 * head, x1, y0 + int(h * 0.65))
    cv2.rectangle(img, body[:2], (body[2] - 1, body[3]), (170, 40, 35), -1)
    for yy in range(body[1], body[3], max(2, h // 12)):  # stripes on the coat
        cv2.line(img, (body[0], yy), (body[2] - 1, yy), (235, 200, 60), max(1, h // 40))
    leg = max(1, w // 4)
    cv2.rectangle(img, (cx - leg - 1, body[3]), (cx - 1, y1 - 1), (30, 30, 60), -1)
    cv2.rectangle(img, (cx + 1, body[3]), (cx + leg + 1, y1 - 1), (30, 30, 60), -1)


def render_camera_frame(config: CameraVideoConfig, scene: np.ndarray, t: float, rng: np.random.Generator) -> np.ndarray:
    """One ``[height, width, 3]`` uint8 RGB frame at ``t`` seconds: scene (+ object), exposure, flicker, noise."""
    width, height = config.size
    img = scene.copy()
    full = _unclipped_box(config, t)
    if full is not None:
        _draw_object(img, full)
    gain = 1.0 + config.drift * math.sin(2 * math.pi * t / config.drift_period_s)
    rows = np.full((height, 1, 1), gain, np.float32)
    if config.flicker_depth > 0:
        row_times = t + config.rolling_shutter_s * np.arange(height, dtype=np.float64) / height
        flicker = 1.0 + config.flicker_depth * np.sin(2 * math.pi * config.flicker_hz * row_times)
        rows = rows * flicker.astype(np.float32)[:, None, None]
    out = img.astype(np.float32) * rows
    if config.noise_sigma > 0:
        out += rng.normal(0.0, config.noise_sigma, out.shape).astype(np.float32)
    return np.clip(out + 0.5, 0, 255).astype(np.uint8)


def write_camera_video(
    path: str | Path, config: CameraVideoConfig, progress: Callable[[int], object] | None = None
) -> list[tuple[float, Box | None]]:
    """Encode the camera video to ``path``; returns ``(time_s, box)`` per frame (box None: no object in view)."""
    width, height = config.size
    rate = Fraction(config.fps).limit_denominator(1001)
    count = max(1, round(config.duration_s * config.fps))
    scene = load_scene(config.scene, config.size)
    rng = np.random.default_rng(config.seed)
    truth: list[tuple[float, Box | None]] = []
    options = {"preset": "veryfast"} if config.codec in ("libx264", "libx265") else {}
    with av.open(str(path), mode="w") as container:
        stream = container.add_stream(config.codec, rate=rate, options=options)
        stream.width, stream.height = width, height
        stream.pix_fmt = "yuv420p"
        stream.bit_rate = config.bitrate
        stream.codec_context.gop_size = max(1, round(config.gop_s * config.fps))
        stream.codec_context.time_base = 1 / rate
        for i in range(count):
            t = float(i / rate)
            frame = av.VideoFrame.from_ndarray(render_camera_frame(config, scene, t, rng), format="rgb24")
            frame.pts = i
            frame.time_base = 1 / rate
            for packet in stream.encode(frame):
                container.mux(packet)
            truth.append((t, object_box(config, t)))
            if progress is not None:
                progress(1)
        for packet in stream.encode():
            container.mux(packet)
    logger.debug("wrote %s: %dx%d, %d frames, moving=%s", path, width, height, count, config.moving)
    return truth


def boxes_path(video: str | Path) -> Path:
    """Where the ground truth of ``video`` lives: ``<video>.boxes.json``."""
    video = Path(video)
    return video.with_name(video.name + ".boxes.json")


def write_boxes(video: str | Path, config: CameraVideoConfig, truth: list[tuple[float, Box | None]]) -> Path:
    """Writes the per-frame boxes (and the config that made the video) next to ``video``; returns the path."""
    record = {
        "video": Path(video).name,
        "size": list(config.size),
        "fps": config.fps,
        "config": asdict(config),
        "frames": [{"t": round(t, 6), "box": list(box) if box else None} for t, box in truth],
    }
    out = boxes_path(video)
    out.write_text(json.dumps(record, indent=1))
    return out


def load_boxes(path: str | Path) -> dict:
    """The record ``write_boxes`` wrote (``path``: the JSON file or its video)."""
    path = Path(path)
    if not path.name.endswith(".boxes.json"):
        path = boxes_path(path)
    return json.loads(path.read_text())


def box_at(record: dict, t: float) -> Box | None:
    """The object's box in the last frame shown at or before ``t`` seconds (None: not in view)."""
    best = None
    for frame in record["frames"]:
        if frame["t"] <= t + 1e-6:
            best = frame["box"]
        else:
            break
    return tuple(best) if best else None
