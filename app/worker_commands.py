"""The commands the assistant's callers (any thread) hand its model worker: one small frozen type each, dispatched by
type in `app.assistant.Assistant._run_command`. Every one goes through the assistant's refusing put (a full queue:
`AssistantBusy`, nothing waits), so no caller ever blocks on the worker, nor the worker's stop on a caller."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

from app.stream import Stream
from capture import CaptureThread
from watches.spec import WatchSpec


@dataclass(frozen=True)
class WatchSource:
    """Switch `stream` to `capture` (opened by the caller); `down`: why a network source starts reconnecting."""

    stream: Stream
    capture: CaptureThread
    down: str | None


@dataclass(frozen=True)
class AddStream:
    """Start the new `stream` (its session built by the caller) on `capture`; `admission`: its memory line."""

    stream: Stream
    capture: CaptureThread
    down: str | None
    admission: str


@dataclass(frozen=True)
class SetRuntimeWatches:
    """Replace the run's runtime watches on every stream: `reasons` why one went, `owners` who set each (by name)."""

    specs: tuple[WatchSpec, ...]
    reasons: Mapping[str, str]
    owners: Mapping[str, str]


@dataclass(frozen=True)
class RemoveStream:
    """Forget `stream` (already out of the assistant's streams); `done` is set once it is gone."""

    stream: Stream
    done: threading.Event


@dataclass(frozen=True)
class StopStream:
    """Stop `stream`'s capture; the stream and its memory stay."""

    stream: Stream


@dataclass(frozen=True)
class ResetStream:
    """Empty `stream`'s memory; it keeps watching."""

    stream: Stream


Command = WatchSource | AddStream | SetRuntimeWatches | RemoveStream | StopStream | ResetStream


def opened_capture(command: Command) -> CaptureThread | None:
    """The capture a command carries (opened, not started): to close when the command is never run."""
    return command.capture if isinstance(command, WatchSource | AddStream) else None
