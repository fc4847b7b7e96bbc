"""Cameras through OpenCV: V4L2 devices by index (Linux, Jetson USB) and GStreamer pipelines (Jetson CSI).

Frames are timestamped with ``time.monotonic()`` when OpenCV returns them (seconds); the stream clock
turns that into stream time starting at 0.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import cv2
import numpy as np

from capture.config import CaptureConfig
from capture.errors import SourceError, StreamDropped
from capture.gst_pipeline import check_camera_pipeline
from capture.source import RawFrame

logger = logging.getLogger(__name__)

CaptureFactory = Callable[[Any, int], Any]
"""``factory(index_or_pipeline, api_preference)`` returning an object like ``cv2.VideoCapture``."""


def opencv_has_gstreamer() -> bool:
    """True if this OpenCV build can open GStreamer pipelines (pip wheels cannot)."""
    for line in cv2.getBuildInformation().splitlines():
        if line.strip().startswith("GStreamer:"):
            return "YES" in line.split(":", 1)[1]
    return False


def bgr_to_rgb(frame: np.ndarray, width: int, height: int) -> np.ndarray:
    """Resize (area averaging when shrinking) then convert an OpenCV frame to ``[height, width, 3]`` RGB."""
    if frame.shape[1] != width or frame.shape[0] != height:
        frame = cv2.resize(frame, (width, height), interpolation=cv2.INTER_AREA)
    if frame.ndim == 2:
        return cv2.cvtColor(frame, cv2.COLOR_GRAY2RGB)
    if frame.shape[2] == 4:
        return cv2.cvtColor(frame, cv2.COLOR_BGRA2RGB)
    return cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)


class CameraSource:
    """An opened camera; ``frames()`` yields frames until the camera stops delivering."""

    is_live = True

    def __init__(self, cap: Any, config: CaptureConfig, first: np.ndarray, first_time: float) -> None:
        self.config = config
        self.description = config.spec.describe()
        self.bad_packets = 0
        self._cap = cap
        self._first: tuple[np.ndarray, float] | None = (first, first_time)

    @classmethod
    def open(cls, config: CaptureConfig, factory: CaptureFactory | None = None) -> CameraSource:
        """Open the camera and read one frame.

        Args:
            config: a config whose source is a camera index or ``gst:<pipeline>``.
            factory: builds the capture object (default ``cv2.VideoCapture``); tests pass a fake.

        Raises:
            SourceError: naming the camera and what to try.
        """
        spec = config.spec
        desc = spec.describe()
        if spec.kind == "gstreamer":
            try:
                check_camera_pipeline(str(spec.target))
            except ValueError as err:
                raise SourceError(f"cannot open {desc}: {err}") from err
            if factory is None and not opencv_has_gstreamer():
                raise SourceError(
                    f"cannot open {desc}: this OpenCV build has no GStreamer support (pip wheels never "
                    "do); on Jetson use JetPack's OpenCV (apt install python3-opencv, and a venv created "
                    "with --system-site-packages), or pass --camera INDEX for a V4L2 camera"
                )
            api = cv2.CAP_GSTREAMER
        else:
            api = cv2.CAP_V4L2 if sys.platform.startswith("linux") else cv2.CAP_ANY
        cap = (factory or cv2.VideoCapture)(spec.target, api)
        if not cap.isOpened():
            cap.release()
            if spec.kind == "gstreamer":
                hint = "check the pipeline with gst-launch-1.0 (it must end in appsink)"
            else:
                hint = (
                    f"check that /dev/video{spec.target} exists (ls /dev/video*; v4l2-ctl --list-devices), "
                    "that you are in the 'video' group and that no other program is using it"
                )
            raise SourceError(f"cannot open {desc}: {hint}")
        ok, frame = cap.read()
        if not ok or frame is None:
            cap.release()
            raise SourceError(
                f"cannot read {desc}: it opened but delivered no frame; check that it is a capture device "
                "(some /dev/video* nodes are metadata-only) and that the lens is not in use elsewhere"
            )
        if hasattr(cv2, "CAP_PROP_BUFFERSIZE"):
            cap.set(cv2.CAP_PROP_BUFFERSIZE, 1)  # low latency: keep the driver queue short
        logger.info("opened %s: %dx%d", desc, frame.shape[1], frame.shape[0])
        return cls(cap, config, frame, time.monotonic())

    def frames(self) -> Iterator[RawFrame]:
        """Yield frames as the camera delivers them.

        Raises:
            StreamDropped: the camera stopped delivering (unplugged, driver error).
        """
        if self._first is not None:
            (frame, t), self._first = self._first, None
            yield self._raw(frame, t)
        while True:
            ok, frame = self._cap.read()
            if not ok or frame is None:
                raise StreamDropped(f"{self.description} stopped delivering frames (unplugged or busy?)")
            yield self._raw(frame, time.monotonic())

    @staticmethod
    def _raw(frame: np.ndarray, t: float) -> RawFrame:
        return RawFrame(
            time=t,
            width=int(frame.shape[1]),
            height=int(frame.shape[0]),
            to_rgb=lambda w, h: bgr_to_rgb(frame, w, h),
        )

    def close(self) -> None:
        """Release the device (idempotent)."""
        self._cap.release()
