"""The interface every backend implements (``capture.backends.open_source`` picks the backend for a config)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from capture.errors import StreamDropped


@dataclass
class RawFrame:
    """A decoded frame, not yet converted: conversion costs time, so only sampled frames pay it.

    Attributes:
        time: presentation time in the source's own clock, seconds (None if the source has none).
        width: source width, pixels.
        height: source height, pixels.
        to_rgb: ``to_rgb(width, height)`` returns ``[height, width, 3]`` uint8 RGB, resized.
    """

    time: float | None
    width: int
    height: int
    to_rgb: Callable[[int, int], np.ndarray]


class FrameSource(Protocol):
    """An opened source. ``frames()`` yields decoded frames until the end of the source.

    Implementations count skipped bad packets in ``bad_packets``; they raise ``StreamDropped`` when a
    live source stops delivering, and ``SourceError`` when a file turns out unreadable mid-way.
    """

    description: str
    bad_packets: int
    is_live: bool

    def frames(self) -> Iterator[RawFrame]: ...

    def close(self) -> None: ...


class ClosedSource:
    """Stands in for a source that was closed (while reopening, or after the end), so counters and
    ``close()`` stay valid without keeping the old decoder alive."""

    is_live = True
    bad_packets = 0

    def __init__(self, description: str) -> None:
        self.description = description

    def frames(self) -> Iterator[RawFrame]:
        return iter(())

    def close(self) -> None:
        pass


class UnreachableSource(ClosedSource):
    """Stands in for a network source that could not be opened at start: reading it reports the stream as
    dropped, so the capture thread reconnects with backoff instead of ending."""

    def __init__(self, description: str, reason: str) -> None:
        super().__init__(description)
        self.reason = reason

    def frames(self) -> Iterator[RawFrame]:
        raise StreamDropped(f"{self.description} is unreachable ({self.reason})")
