"""Pure stream-time logic: the stream clock, fps sampling by timestamp, grouping into clips, target size.

Nothing here touches threads, clocks or decoders, so it is tested directly with lists of timestamps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

# Timestamps come from rational time bases; this absorbs float rounding (seconds).
_EPS = 1e-6


def fit_size(width: int, height: int, max_size: tuple[int, int] | None) -> tuple[int, int]:
    """Largest ``(width, height)`` with the source aspect ratio that fits in ``max_size``; never upscales."""
    if max_size is None:
        return width, height
    scale = min(max_size[0] / width, max_size[1] / height, 1.0)
    if scale >= 1.0:
        return width, height
    return max(1, min(max_size[0], round(width * scale))), max(1, min(max_size[1], round(height * scale)))


class StreamClock:
    """Maps raw source timestamps to a stream time that starts at 0 and never goes backwards.

    After ``restart()`` (a loop or a reconnection) the next raw time is checked: if it continues the
    old timeline (a live stream whose timestamps kept running while we were away) it is kept, so the
    missed stretch shows as a gap; if it went back or jumped far ahead (the source restarted) the
    timeline is rebased to continue one frame interval after the last frame. A jump back of a second
    or more, or ahead by more than ``max_jump_s``, is treated the same way at any time (a timestamp
    wrap or an encoder restart inside one connection); smaller backward steps are returned as they are
    and simply not sampled.
    """

    def __init__(self, max_jump_s: float = 60.0) -> None:
        self.max_jump_s = max_jump_s
        self._offset: float | None = None
        self._last_raw: float | None = None
        self._last: float | None = None
        self._interval: float | None = None  # estimated frame interval, seconds
        self._check_next = False

    @property
    def last(self) -> float | None:
        """Stream time of the last mapped frame, seconds (None before the first)."""
        return self._last

    def restart(self) -> None:
        """The source was reopened: re-check continuity on the next timestamp."""
        self._check_next = True

    def map(self, raw_t: float | None) -> float:
        """Stream seconds for a frame with raw presentation time ``raw_t`` (None: unknown, extrapolated)."""
        if self._offset is None or self._last is None or self._last_raw is None:
            raw = 0.0 if raw_t is None else raw_t
            self._offset = -raw
            self._last_raw = raw
            self._last = 0.0
            self._check_next = False
            return 0.0
        interval = self._interval if self._interval is not None else 1.0 / 30.0
        raw = self._last_raw + interval if raw_t is None else raw_t
        step = raw - self._last_raw
        jumped = step <= -1.0 or step > self.max_jump_s
        if jumped or (self._check_next and step <= 0):
            self._offset = self._last + interval - raw
        elif not self._check_next and 0 < step < 1.0:
            # Running estimate of the frame interval, used to place frames after a rebase.
            self._interval = step if self._interval is None else 0.9 * self._interval + 0.1 * step
        self._check_next = False
        self._last_raw = raw
        t = raw + self._offset
        self._last = max(self._last, t)
        return t


class FrameSampler:
    """Keeps the first frame at or after each point of a ``1/fps`` grid anchored at the first frame.

    Frames are chosen by presentation time, so variable frame rate sources are sampled evenly in time.
    A gap in the source skips the grid points inside it (no duplicated frames).
    """

    def __init__(self, fps: float) -> None:
        if fps <= 0:
            raise ValueError(f"fps must be > 0, got {fps}")
        self.interval = 1.0 / fps
        self._t0: float | None = None
        self._next_due = 0.0

    def offer(self, t: float) -> bool:
        """True if the frame at stream time ``t`` (seconds) should be kept."""
        if self._t0 is None:
            self._t0 = t
        elif t + _EPS < self._next_due:
            return False
        k = math.floor((t - self._t0) / self.interval + _EPS) + 1
        self._next_due = self._t0 + k * self.interval
        return True


@dataclass
class PendingClip:
    """Frames of one clip window, before they are stacked into a ``Clip``."""

    window: int
    t_start: float
    t_end: float
    frames: list[np.ndarray] = field(default_factory=list)
    timestamps: list[float] = field(default_factory=list)


class ClipAssembler:
    """Groups sampled frames into windows ``[k * clip_seconds, (k + 1) * clip_seconds)`` of stream time.

    A clip is released as soon as it holds every grid point of its window (no waiting for the next
    frame), when a frame of a later window arrives, when the frame size changes, or on ``flush()``.
    """

    def __init__(self, clip_seconds: float, fps: float) -> None:
        self.clip_seconds = clip_seconds
        self.fps = fps
        self._current: PendingClip | None = None

    def expected_frames(self, window: int) -> int:
        """Grid points ``k / fps`` (sampler anchored at 0) that fall inside clip window ``window``."""
        lo = window * self.clip_seconds * self.fps
        hi = (window + 1) * self.clip_seconds * self.fps
        return max(1, math.ceil(hi - _EPS) - math.ceil(lo - _EPS))

    def add(self, t: float, frame: np.ndarray) -> list[PendingClip]:
        """Add a sampled frame (stream seconds ``t``, ``[H, W, 3]``); returns the clips it completed."""
        done: list[PendingClip] = []
        window = math.floor(t / self.clip_seconds + _EPS)
        cur = self._current
        if cur is not None and (window != cur.window or cur.frames[0].shape != frame.shape):
            done.append(self._close(cur, partial=window == cur.window))
            cur = None
        if cur is None:
            start = window * self.clip_seconds
            if done and done[-1].window == window:  # the frame size changed mid-window
                start = t
            cur = PendingClip(window, start, (window + 1) * self.clip_seconds)
        cur.frames.append(frame)
        cur.timestamps.append(t)
        self._current = cur
        if len(cur.frames) >= self.expected_frames(window):
            done.append(self._close(cur, partial=False))
        return done

    def flush(self) -> PendingClip | None:
        """Release the unfinished clip at the end of the stream (its ``t_end`` is cut to what was seen)."""
        cur = self._current
        return None if cur is None else self._close(cur, partial=True)

    def _close(self, clip: PendingClip, partial: bool) -> PendingClip:
        self._current = None
        if partial:
            clip.t_end = min(clip.t_end, clip.timestamps[-1] + 1.0 / self.fps)
        return clip


def pacing_delay(t: float, t0: float, wall0: float, now: float) -> float:
    """Seconds to wait so that stream time ``t`` is shown at wall time ``wall0 + (t - t0)`` (>= 0).

    ``(t0, wall0)`` pairs the first paced frame's stream time with the wall clock when it was shown.
    """
    return max(0.0, wall0 + (t - t0) - now)
