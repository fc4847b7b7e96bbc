"""A bounded FIFO whose `put` never blocks: when it is full the oldest item is dropped and counted.

Outputs sit behind one of these so that the thread producing events (the model worker) never waits on a
slow consumer (a broker, a webhook): it loses the oldest undelivered item instead, and the loss is counted.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from typing import Generic, TypeVar

T = TypeVar("T")


class DropOldestQueue(Generic[T]):
    """Thread-safe FIFO of at most `maxsize` items; `put` drops the oldest when full (see `dropped`)."""

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be at least 1, got {maxsize}")
        self.maxsize = maxsize
        self._items: deque[T] = deque()
        self._cond = threading.Condition()
        self._dropped = 0

    @property
    def dropped(self) -> int:
        """How many items were dropped (oldest first) because the queue was full."""
        with self._cond:
            return self._dropped

    def put(self, item: T) -> None:
        """Appends `item`; never blocks."""
        with self._cond:
            if len(self._items) >= self.maxsize:
                self._items.popleft()
                self._dropped += 1
            self._items.append(item)
            self._cond.notify()

    def get(self, timeout: float) -> T:
        """The oldest item, waiting up to `timeout` seconds; raises `queue.Empty` when none came."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._items, timeout=timeout):
                raise queue.Empty
            return self._items.popleft()

    def drain(self) -> list[T]:
        """Removes and returns every item now queued (oldest first)."""
        with self._cond:
            items = list(self._items)
            self._items.clear()
            return items

    def __len__(self) -> int:
        with self._cond:
            return len(self._items)
