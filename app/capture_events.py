"""A stream's capture thread speaks in `capture.CaptureEvent`s; the rest of the assistant in bus events. This is
where one becomes the other, and where the stream's state follows its capture (a drop: reconnecting; back:
watching). Runs on the model worker, which owns the streams."""

from __future__ import annotations

from app.stream import Stream
from app.stream_events import StreamEvents
from bus import CaptureChange, CaptureKind, StreamState

# capture event type -> (the kind of change it is, the stream's state after; None: unchanged)
_CHANGES: dict[str, tuple[CaptureKind, StreamState | None]] = {
    "reconnect": (CaptureKind.DROPPED, StreamState.RECONNECTING),
    "reconnected": (CaptureKind.RECONNECTED, StreamState.WATCHING),
    "warning": (CaptureKind.WARNING, None),
}


class CaptureEvents:
    """Publishes what a stream's capture reports: errors as error events, drops, reconnections and warnings as
    `CaptureChange` events of their kind. The end of a stream comes as the capture's `EndOfStream` clip instead."""

    def __init__(self, events: StreamEvents) -> None:
        self.events = events

    def forward(self, stream: Stream) -> None:
        """Everything `stream`'s capture reported since the last call."""
        if stream.capture is None:
            return
        for event in stream.capture.poll_events():
            if event.type == "error":
                self.events.error(stream, "capture", event.message)
            elif event.type in _CHANGES:
                kind, state = _CHANGES[event.type]
                stream.state = state or stream.state
                self.events.publish(CaptureChange, stream, kind=kind, message=event.message, state=stream.state)

    def started_down(self, stream: Stream, description: str, why: str) -> None:
        """A network source that was down when its capture started: the capture reconnects with backoff."""
        message = f"{description} is down ({why}); reconnecting"
        self.events.error(stream, "capture", message)
        stream.state = StreamState.RECONNECTING
        self.events.publish(CaptureChange, stream, kind=CaptureKind.DROPPED, message=message, state=stream.state)
