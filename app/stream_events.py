"""How the assistant's parts publish: every event named by its stream (None for the whole process)."""

from __future__ import annotations

from app.stream import Stream
from bus import ErrorEvent, Event, EventBus
from bus.redact import redacted


class StreamEvents:
    """Publishes on `bus` with the `stream` field filled in and logins redacted from the text."""

    def __init__(self, bus: EventBus) -> None:
        self.bus = bus

    def publish(self, event_type: type[Event], stream: Stream | None, /, **fields) -> None:
        """An event of `event_type` (a `bus.events` class) of `stream`, with `fields`."""
        self.bus.publish(redacted(event_type(stream=stream.name if stream is not None else None, **fields)))

    def error(self, stream: Stream | None, where: str, message: str, request: str | None = None) -> None:
        """request: the API request whose question failed (None for everything else)."""
        stream_time = stream.stream_time if stream is not None else None
        self.publish(ErrorEvent, stream, where=where, message=message, stream_time=stream_time, request=request)

    def store_errors(self, stream: Stream) -> None:
        """Problems of the stream's host-store folder since the last call, as error events."""
        for message in stream.session.take_store_errors():
            self.error(stream, "store", message)
