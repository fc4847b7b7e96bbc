"""How the assistant's parts publish: every event named by its stream (None for the whole process)."""

from __future__ import annotations

from app.events import EventBus, make_event
from app.stream import Stream


class StreamEvents:
    """Publishes on `bus` with the `stream` field filled in."""

    def __init__(self, bus: EventBus) -> None:
        self.bus = bus

    def publish(self, type_: str, stream: Stream | None, **fields) -> None:
        self.bus.publish(make_event(type_, stream=stream.name if stream is not None else None, **fields))

    def error(self, stream: Stream | None, where: str, message: str) -> None:
        stream_time = stream.stream_time if stream is not None else None
        self.publish("error", stream, where=where, message=message, stream_time=stream_time)

    def store_errors(self, stream: Stream) -> None:
        """Problems of the stream's host-store folder since the last call, as error events."""
        for message in stream.session.take_store_errors():
            self.error(stream, "store", message)
