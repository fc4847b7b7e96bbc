"""Where frames come from: files and network streams (PyAV), cameras (OpenCV), a capture thread that
samples them at a requested fps into clips, and a bounded drop-oldest queue to the consumer.

Knows nothing about models. See ``capture.thread`` for a usage example.
"""

from bus.drop_queue import DropOldestQueue
from capture.backends import open_source
from capture.config import CaptureConfig, SourceSpec, parse_source
from capture.errors import SourceError, StreamDropped
from capture.reconnect import ReconnectDecision, ReconnectPolicy
from capture.sampling import ClipAssembler, FrameSampler, StreamClock, fit_size
from capture.source import FrameSource, RawFrame
from capture.thread import CaptureThread
from capture.types import CaptureEvent, CaptureStats, Clip, EndOfStream

__all__ = [
    "CaptureConfig",
    "CaptureEvent",
    "CaptureStats",
    "CaptureThread",
    "Clip",
    "ClipAssembler",
    "DropOldestQueue",
    "EndOfStream",
    "FrameSampler",
    "FrameSource",
    "RawFrame",
    "ReconnectDecision",
    "ReconnectPolicy",
    "SourceError",
    "SourceSpec",
    "StreamClock",
    "StreamDropped",
    "fit_size",
    "open_source",
    "parse_source",
]
