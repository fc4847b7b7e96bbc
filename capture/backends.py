"""``open_source``: picks the backend for a config (PyAV for files and URLs, OpenCV for cameras) and opens it.

Each backend is imported only when chosen (opening a file never loads OpenCV).
"""

from __future__ import annotations

from capture.config import CaptureConfig
from capture.source import FrameSource


def open_source(config: CaptureConfig) -> FrameSource:
    """Open the source of ``config`` and decode its first frame, so failures surface now.

    Raises:
        SourceError: with a message naming the source and what to try.
    """
    kind = config.spec.kind
    if kind in ("camera", "gstreamer"):
        from capture.camera_source import CameraSource

        return CameraSource.open(config)
    from capture.av_source import AvSource

    return AvSource.open(config)
