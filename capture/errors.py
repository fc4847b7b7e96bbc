"""Errors raised by capture: ``SourceError`` before streaming starts, ``StreamDropped`` inside the thread."""

from __future__ import annotations

from bus.redact import redact_source


class SourceError(Exception):
    """A source could not be opened. The message names the source and says what to try.

    Raised by ``open_source`` (and so by ``CaptureThread(...)``) before any thread starts; a CLI
    catches it and exits with code 2. The message never holds a login (see ``bus.redact``).
    """

    def __init__(self, message: str = "") -> None:
        super().__init__(redact_source(str(message)))


class StreamDropped(Exception):
    """A live source (network stream or camera) stopped delivering mid-stream; the thread reconnects.

    Internal to the capture thread: it becomes a "reconnect" or "error" event, never reaches the consumer.
    """

    def __init__(self, message: str = "") -> None:
        super().__init__(redact_source(str(message)))
