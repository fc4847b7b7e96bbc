"""One watched stream inside the assistant: its session (tier-1 cache + tier-2 store), its capture thread, its
standing question and how far it has got. Only the model worker thread changes these, except `schedule`
(thread-safe) and the read-only views the page and the terminal take."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from bus import StreamState
from capture import CaptureConfig, CaptureThread, SourceError
from capture.source import UnreachableSource
from model.session import StreamingSession
from watches.scheduler import StandingQuestion
from watches.watch import Watch


@dataclass
class Stream:
    """name: as configured (safe in topics and file names). state: idle (no source), watching, reconnecting
    (a network source is down; capture retries with backoff), ended. lag_s: seconds from a clip's last frame
    being captured to its prefill being done, for the latest clip (how far behind real time the stream runs)."""

    name: str
    session: StreamingSession
    schedule: StandingQuestion
    capture: CaptureThread | None = None
    stream_time: float = 0.0
    state: StreamState = StreamState.IDLE
    lag_s: float = 0.0
    clips: int = 0
    answers: int = 0
    finished: bool = False  # reached its end (or --duration): no more clips expected
    watches: list[Watch] = field(default_factory=list)  # yes/no watches checked on this stream
    reconnects_seen: int = 0  # the capture's reconnections so far: a clip after a new one enters whole

    def close_capture(self) -> None:
        if self.capture is not None:
            self.capture.close()
            self.capture = None


def open_capture(config: CaptureConfig, allow_down: bool) -> tuple[CaptureThread, str | None]:
    """A capture thread for `config` (not started) and, when its network source could not be opened and
    `allow_down` is set, the reason: the thread then starts by reconnecting with backoff. A file or a local
    camera that cannot be opened raises `SourceError` (a configuration error)."""
    try:
        return CaptureThread(config, threading.Event()), None
    except SourceError as err:
        if not (allow_down and config.spec.kind == "url"):
            raise
        source = UnreachableSource(config.spec.describe(), str(err))
        return CaptureThread(config, threading.Event(), source=source), str(err)
