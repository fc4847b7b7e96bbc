"""A clip that entered a stream's cache, told to the rest of the process: the `clip` event (its place in the
stream, what the session measured of it, the capture queue's counts) and, once enough clips were timed, one
warning when the live streams bring clips faster than the model ingests them."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable

from app.admission import ingest_warning
from app.stream import Stream
from app.stream_events import StreamEvents
from bus import ClipEvent, ClipStats, WarningEvent
from capture import CaptureConfig, Clip

TIMED_CLIPS = 32  # the latest clips' prefill times kept, all streams together


class ClipPublisher:
    """Publishes each ingested clip. streams: the assistant's streams as they are now (the live ones decide the
    pace the ingest must keep)."""

    def __init__(self, events: StreamEvents, streams: Callable[[], Iterable[Stream]]) -> None:
        self.events, self.streams = events, streams
        self._prefill_s: deque[float] = deque(maxlen=TIMED_CLIPS)
        self._warned = False

    def publish(self, stream: Stream, clip: Clip, stats: ClipStats) -> None:
        """Updates the stream's progress by `clip` and publishes its `clip` event (with `stats` as the session made
        them)."""
        stream.lag_s = max(time.time() - clip.wall_time, 0.0) if clip.wall_time else 0.0
        self._check_ingest_rate(stats.prefill_s)
        self.events.publish(
            ClipEvent,
            stream,
            index=clip.index,
            stream_time=round(clip.t_end, 3),
            t_start=round(clip.t_start, 3),
            stats=stats,
            budget=stream.session.cache_config.budget,
            lag_s=round(stream.lag_s, 3),
            queued_clips=stream.capture.queued_clips() if stream.capture else 0,
            dropped_clips=clip.dropped_clips,
            dropped_frames=clip.dropped_frames,
            preview=clip.frames[-1],
        )

    def _check_ingest_rate(self, prefill_s: float) -> None:
        """Warns (once) when the live streams bring clips faster than they are ingested, saying what to lower."""
        self._prefill_s.append(prefill_s)
        live = [s for s in self.streams() if s.capture is not None and _paced(s.capture.config)]
        if self._warned or len(self._prefill_s) < 4 or not live:
            return
        clip_seconds = min(s.capture.config.clip_seconds for s in live)
        warning = ingest_warning(list(self._prefill_s), len(live), clip_seconds)
        if warning is not None:
            self._warned = True
            self.events.publish(WarningEvent, None, where="ingest", message=warning)


def _paced(config: CaptureConfig) -> bool:
    """Whether clips arrive at the pace of the world (live sources, files played in real time)."""
    return config.is_live or config.realtime
