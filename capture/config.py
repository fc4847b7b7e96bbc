"""Capture settings (one dataclass, validated on construction) and how a source string is interpreted.

Source forms accepted by ``CaptureConfig.source``:

- ``0``, ``"0"``, ``"/dev/video0"``: a camera through OpenCV (V4L2 on Linux/Jetson).
- ``"gst:<pipeline>"``: an OpenCV GStreamer pipeline from one camera source to ``appsink`` and nothing else
  (``capture.gst_pipeline`` checks it before it is opened; Jetson CSI cameras,
  e.g. ``gst:nvarguscamerasrc ! video/x-raw(memory:NVMM),width=1920,height=1080 ! nvvidconv !
  video/x-raw,format=BGRx ! videoconvert ! video/x-raw,format=BGR ! appsink drop=1``).
- ``"http://..."``, ``"https://..."``, ``"rtsp://..."``, ``"rtsps://..."``, ``"rtmp://..."``, ``"srt://..."``,
  ``"udp://..."``, ``"tcp://..."``: a network stream through PyAV (FFmpeg).
- anything else (or ``"file://..."``): a video file path through PyAV.
"""

from __future__ import annotations

import ipaddress
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from bus.redact import redact_source
from capture.credentials import has_userinfo
from capture.frame_limits import MAX_ASPECT_RATIO, MAX_SOURCE_PIXELS
from capture.reconnect import ReconnectPolicy

SourceKind = Literal["file", "url", "camera", "gstreamer"]
NETWORK_SCHEMES = ("http", "https", "rtsp", "rtsps", "rtmp", "srt", "udp", "tcp")
RTSP_TRANSPORTS = ("tcp", "udp")
_SCHEME_RE = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*)://")


@dataclass(frozen=True)
class SourceSpec:
    """A parsed source: its kind and what to hand to the backend (path, URL, index or pipeline)."""

    kind: SourceKind
    target: str | int

    def describe(self) -> str:
        """A short name for messages, e.g. ``camera 0`` or ``file 'clip.mp4'``; never holds a login
        (``rtsp://***@host/x``)."""
        if self.kind == "camera":
            return f"camera {self.target}"
        if self.kind == "gstreamer":
            return f"GStreamer pipeline '{redact_source(self.target)}'"
        if self.kind == "url":  # redacted bare, before quoting: a password may hold the quote
            return f"stream '{redact_source(self.target)}'"
        return f"file '{self.target}'"


def parse_source(source: str | int | Path) -> SourceSpec:
    """Interpret a ``--video``/``--camera`` value; raises ValueError for unsupported URL schemes."""
    if isinstance(source, bool):
        raise ValueError(f"source must be a path, URL, camera index or 'gst:<pipeline>', got {source!r}")
    if isinstance(source, int):
        if source < 0:
            raise ValueError(f"camera index must be >= 0, got {source}")
        return SourceSpec("camera", source)
    text = str(source).strip()
    if not text:
        raise ValueError("source is empty: give a video path, a URL, a camera index or 'gst:<pipeline>'")
    if text.isdigit():
        return SourceSpec("camera", int(text))
    if re.fullmatch(r"/dev/video\d+", text):
        return SourceSpec("camera", int(text.removeprefix("/dev/video")))
    if text.startswith("gst:"):
        pipeline = text[4:].strip()
        if not pipeline:
            raise ValueError("'gst:' must be followed by a GStreamer pipeline ending in appsink")
        return SourceSpec("gstreamer", pipeline)
    match = _SCHEME_RE.match(text)
    if match:
        scheme = match.group(1).lower()
        if scheme == "file":
            return SourceSpec("file", text[len("file://") :])
        if scheme not in NETWORK_SCHEMES:
            raise ValueError(
                f"unsupported URL scheme '{scheme}://' in {redact_source(text)!r}; allowed: "
                + ", ".join(f"{s}://" for s in NETWORK_SCHEMES)
                + ", file://, a file path, a camera index or 'gst:<pipeline>'"
            )
        return SourceSpec("url", text)
    return SourceSpec("file", text)


def _check_positive(name: str, value: float, unit: str) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0 {unit}, got {value!r}")


@dataclass
class CaptureConfig:
    """How to capture one source.

    Attributes:
        source: path, URL, camera index or ``gst:<pipeline>`` (see the module docstring).
        fps: frames sampled per second of stream time (by presentation timestamp, not frame count).
        clip_seconds: stream seconds per clip; a clip holds about ``fps * clip_seconds`` frames.
        realtime: pace files to their timestamps (live mode); False decodes as fast as possible
            (benchmarks, tests). Cameras and network streams are real-time by nature and never paced.
        loop: restart a file at its end (files only); stream time keeps increasing across loops.
        max_size: bounding box ``(width, height)`` in pixels; frames are downscaled keeping their aspect
            ratio to fit (never upscaled). None keeps the source size.
        queue_size: clips held for the consumer; when full, the oldest clip is dropped and counted.
        open_timeout_s: seconds allowed to open a network stream or camera (and to decode its first frame).
        read_timeout_s: seconds without a packet before a network stream counts as dropped. Also the
            longest a stop can wait while the network is stalled (FFmpeg reads cannot be interrupted).
        reconnect: backoff schedule after a network stream or camera drops.
        decoder_threads: FFmpeg decoder threads; 0 lets FFmpeg choose (one per core).
        rtsp_transport: "tcp" (default, robust) or "udp" (lower latency on clean links).
        max_consecutive_errors: bad packets in a row after which a file is treated as unreadable from
            there on (the stream ends with an error event) and a network stream as dropped.
        event_queue_size: mid-stream events kept for the consumer (oldest dropped first).
        block_when_full: for files, wait for the consumer instead of dropping the oldest clip (offline
            runs: --no-realtime, benchmarks, tests). Live sources always drop: the world does not wait.
        credentials: (user, password) for a network URL that carries no login itself; joined to the URL
            only when the source is opened (``capture.credentials``), never shown (not in repr).
        follow_redirects: whether an http(s) source may redirect elsewhere. False for sources chosen while
            running (capture.policy checked the host of the URL given, not of where a redirect leads).
        connect_to: the IP address a network source's host was checked at (capture.policy, sources chosen while
            running): the source connects there and nowhere else, never resolving its host again (the shown
            URL keeps the name; http(s) sends it as Host). None resolves the host when connecting.
        max_source_pixels: the most pixels a decoded frame of a file or network stream may have (before
            downscaling); a larger source is refused (capture.frame_limits).
        max_aspect_ratio: the widest (or tallest) frame shape a file or network stream may have, long side over
            short side; a more extreme one is refused.

    A field with `metadata={"help": ...}` is a command-line flag and a --config key (app/config_flags.py).
    """

    source: str | int | Path
    fps: float = field(default=1.0, metadata={"help": "frames sampled per second of stream time"})
    clip_seconds: float = field(
        default=4.0, metadata={"help": "stream seconds per clip fed to the model", "unit": "seconds"}
    )
    realtime: bool = False
    loop: bool = field(default=False, metadata={"help": "restart a video file at its end"})
    max_size: tuple[int, int] | None = None
    queue_size: int = 2
    open_timeout_s: float = 10.0
    read_timeout_s: float = 5.0
    reconnect: ReconnectPolicy = field(default_factory=ReconnectPolicy)
    decoder_threads: int = 0
    rtsp_transport: str = "tcp"
    max_consecutive_errors: int = 200
    event_queue_size: int = 64
    block_when_full: bool = False
    credentials: tuple[str, str] | None = field(default=None, repr=False, compare=False)
    follow_redirects: bool = True
    connect_to: str | None = None
    max_source_pixels: int = MAX_SOURCE_PIXELS
    max_aspect_ratio: float = MAX_ASPECT_RATIO
    spec: SourceSpec = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.spec = parse_source(self.source)
        _check_positive("fps", self.fps, "(frames per second of stream time, e.g. 1 or 2)")
        if self.fps > 240:
            raise ValueError(f"fps must be <= 240 frames per second, got {self.fps}")
        _check_positive("clip_seconds", self.clip_seconds, "seconds")
        if self.fps * self.clip_seconds < 1.0 - 1e-9:
            raise ValueError(
                f"fps * clip_seconds must be >= 1 so each clip holds a frame, got {self.fps} * "
                f"{self.clip_seconds}; raise fps or clip_seconds"
            )
        if self.max_size is not None:
            if len(self.max_size) != 2 or any(
                not isinstance(v, int) or isinstance(v, bool) or v < 2 for v in self.max_size
            ):
                raise ValueError(f"max_size must be None or (width, height) ints >= 2 pixels, got {self.max_size}")
            self.max_size = (int(self.max_size[0]), int(self.max_size[1]))
        if self.connect_to is not None:
            scheme = str(self.spec.target).split(":", 1)[0].lower() if self.spec.kind == "url" else None
            if scheme not in ("http", "https", "rtsp"):
                raise ValueError(f"connect_to applies to http, https and rtsp URLs only, not to {self.spec.describe()}")
            try:
                ipaddress.ip_address(self.connect_to)
            except ValueError as err:
                raise ValueError(f"connect_to must be an IP address, got {self.connect_to!r}") from err
        if not isinstance(self.max_source_pixels, int) or self.max_source_pixels < 4:
            raise ValueError(f"max_source_pixels must be an int >= 4 (pixels), got {self.max_source_pixels!r}")
        _check_positive("max_aspect_ratio", self.max_aspect_ratio, "(long side over short side, e.g. 20)")
        if self.max_aspect_ratio < 1:
            raise ValueError(f"max_aspect_ratio must be >= 1 (long side over short side), got {self.max_aspect_ratio}")
        if not isinstance(self.queue_size, int) or self.queue_size < 1:
            raise ValueError(f"queue_size must be an int >= 1 (clips), got {self.queue_size!r}")
        _check_positive("open_timeout_s", self.open_timeout_s, "seconds")
        _check_positive("read_timeout_s", self.read_timeout_s, "seconds")
        if self.loop and self.spec.kind != "file":
            raise ValueError(f"loop applies to files only, not to {self.spec.describe()}")
        if not isinstance(self.decoder_threads, int) or self.decoder_threads < 0:
            raise ValueError(f"decoder_threads must be an int >= 0 (0 = auto), got {self.decoder_threads!r}")
        if self.rtsp_transport not in RTSP_TRANSPORTS:
            raise ValueError(f"rtsp_transport must be one of {RTSP_TRANSPORTS}, got {self.rtsp_transport!r}")
        if self.max_consecutive_errors < 1:
            raise ValueError(f"max_consecutive_errors must be >= 1, got {self.max_consecutive_errors}")
        if self.event_queue_size < 1:
            raise ValueError(f"event_queue_size must be >= 1, got {self.event_queue_size}")
        if self.credentials is not None:
            if self.spec.kind != "url":
                raise ValueError(f"credentials apply to network URLs only, not to {self.spec.describe()}")
            if has_userinfo(str(self.spec.target)):
                raise ValueError(f"{self.spec.describe()} has a login in its URL already: give it once")
            if len(self.credentials) != 2 or not all(isinstance(v, str) and v for v in self.credentials):
                raise ValueError("credentials must be (user, password), both non-empty")

    @property
    def is_live(self) -> bool:
        """True for cameras and network streams (they reconnect and are never paced or looped)."""
        return self.spec.kind != "file"
