"""What the capture thread hands to its consumer: clips, events, counters and the end-of-stream marker."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

EventType = Literal["error", "warning", "reconnect", "reconnected", "end"]


@dataclass(frozen=True)
class CaptureStats:
    """Capture counters (all cumulative since the thread started).

    Attributes:
        decoded_frames: frames decoded from the source (before sampling).
        sampled_frames: frames kept by the fps sampler.
        clips: clips produced (queued or dropped).
        dropped_clips: clips dropped because the consumer fell behind (the queue was full).
        dropped_frames: frames inside those dropped clips.
        bad_packets: packets that failed to demux or decode and were skipped.
        reconnects: successful reconnections after a drop.
        dropped_events: events discarded because nobody read ``events`` in time.
    """

    decoded_frames: int = 0
    sampled_frames: int = 0
    clips: int = 0
    dropped_clips: int = 0
    dropped_frames: int = 0
    bad_packets: int = 0
    reconnects: int = 0
    dropped_events: int = 0


@dataclass
class Clip:
    """A group of sampled frames covering ``[t_start, t_end)`` seconds of stream time.

    Attributes:
        frames: ``[F, H, W, 3]`` uint8 RGB.
        timestamps: stream seconds of each frame (0 = first frame of the stream), increasing.
        t_start: start of the clip's window, stream seconds.
        t_end: end of the window, stream seconds (for the last, partial clip of a stream: the last
            frame's time plus one sampling interval).
        index: sequence number of the clip since the start (dropped clips leave gaps).
        stats: the capture counters when the clip was made (dropped clips/frames so far, ...).
        wall_time: ``time.time()`` when the clip was completed, seconds.
    """

    frames: np.ndarray
    timestamps: list[float]
    t_start: float
    t_end: float
    index: int
    stats: CaptureStats = field(default_factory=CaptureStats)
    wall_time: float = 0.0

    @property
    def dropped_clips(self) -> int:
        """Clips dropped before this one was made."""
        return self.stats.dropped_clips

    @property
    def dropped_frames(self) -> int:
        """Frames dropped (inside dropped clips) before this clip was made."""
        return self.stats.dropped_frames

    @property
    def num_frames(self) -> int:
        return int(self.frames.shape[0])


@dataclass(frozen=True)
class CaptureEvent:
    """Something that happened mid-stream, for the consumer's log/UI (never raised into it).

    Attributes:
        type: "error" (something failed: bad packets, a drop we gave up on), "warning",
            "reconnect" (dropped: reconnecting), "reconnected" (back), or "end" (the stream finished; see
            message).
        message: human-readable, naming the source.
        stream_time: stream seconds of the last decoded frame when it happened (None before any).
        wall_time: ``time.time()`` when it happened, seconds.
    """

    type: EventType
    message: str
    stream_time: float | None
    wall_time: float


@dataclass(frozen=True)
class EndOfStream:
    """Returned by ``CaptureThread.get_clip`` once every clip has been consumed and capture ended.

    Attributes:
        reason: "eof" (the file ended), "stopped" (the stop event was set), or "error"
            (the source failed mid-stream and could not be recovered; see ``message``).
        message: human-readable detail.
    """

    reason: Literal["eof", "stopped", "error"]
    message: str = ""
