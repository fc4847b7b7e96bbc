"""Which GStreamer pipelines a ``gst:`` source may be: one camera into the app's appsink, nothing else.

GStreamer's own parser builds whatever a description names: a ``tee`` and a second branch into a
``filesink`` writes any file, a ``tcpserversink`` listens on the network. So a ``gst:`` source (accepted
only from the command line or the --config file, never from the page or the terminal) must be a single
chain of ``!``-separated elements: a camera source first, ``appsink`` last, and between them only
converters, decoders, queues and caps. Pure parsing, no GStreamer needed.
"""

from __future__ import annotations

import re

CAMERA_SOURCES = (
    "nvarguscamerasrc",  # Jetson CSI cameras
    "nvv4l2camerasrc",
    "v4l2src",
    "libcamerasrc",
    "avfvideosrc",
    "ksvideosrc",
    "mfvideosrc",
)
FILTERS = (
    "nvvidconv",
    "nvvideoconvert",
    "videoconvert",
    "videoscale",
    "videorate",
    "videoflip",
    "videocrop",
    "capsfilter",
    "queue",
    "jpegdec",
    "jpegparse",
    "nvjpegdec",
    "nvv4l2decoder",
    "v4l2jpegdec",
    "h264parse",
    "h265parse",
    "avdec_h264",
    "avdec_h265",
    "avdec_mjpeg",
)
SINK = "appsink"
_ELEMENT = re.compile(r"^[a-z0-9_]+$")
_PROPERTY = re.compile(r"^[a-z][a-z0-9_-]*=[A-Za-z0-9_.:/,+-]+$")  # no quotes, brackets, references or spaces
_CAPS = re.compile(r"^(video|image)/[a-z0-9.+-]+(\(memory:[A-Za-z]+\))?(,[a-z][a-z0-9_-]*=[A-Za-z0-9_./()-]+)*$")
_FORBIDDEN_PROPERTIES = ("location", "name", "uri", "host", "port")


def check_camera_pipeline(pipeline: str) -> None:
    """Raises ValueError unless `pipeline` (without its ``gst:`` prefix) is one camera source, then only
    the FILTERS and caps, then ``appsink``; the message names the element at fault and what is allowed."""
    allowed = (
        f"a gst: source must be one chain 'CAMERA ! ... ! {SINK}' with CAMERA one of {', '.join(CAMERA_SOURCES)}, "
        f"then caps (video/x-raw,...) or {', '.join(FILTERS)}, and {SINK} last (no tee, no other sink or source)"
    )
    parts = [part.strip() for part in pipeline.split("!")]
    if len(parts) < 2 or any(not part for part in parts):
        raise ValueError(f"GStreamer pipeline {pipeline!r}: {allowed}")
    for position, part in enumerate(parts):
        tokens = part.split()
        element, properties = tokens[0], tokens[1:]
        if _CAPS.fullmatch(element) and not properties:
            if position in (0, len(parts) - 1):
                raise ValueError(f"GStreamer pipeline {pipeline!r}: caps cannot start or end it; {allowed}")
            continue
        if not _ELEMENT.fullmatch(element):
            raise ValueError(f"GStreamer pipeline {pipeline!r}: {element!r} is not an element name; {allowed}")
        expected = CAMERA_SOURCES if position == 0 else (SINK,) if position == len(parts) - 1 else FILTERS
        if element not in expected:
            raise ValueError(f"GStreamer pipeline {pipeline!r}: {element!r} is not allowed there; {allowed}")
        for prop in properties:
            if not _PROPERTY.fullmatch(prop):
                raise ValueError(
                    f"GStreamer pipeline {pipeline!r}: {prop!r} after {element} is not a plain property=value "
                    f"(a second branch or element needs '!'); {allowed}"
                )
            if prop.split("=", 1)[0] in _FORBIDDEN_PROPERTIES:
                raise ValueError(f"GStreamer pipeline {pipeline!r}: property {prop!r} is not allowed; {allowed}")
