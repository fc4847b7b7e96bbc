"""A bounded queue whose producer never blocks: when full, the oldest item is dropped and counted."""

from __future__ import annotations

import collections
import queue
import threading
import time
from typing import Generic, TypeVar

T = TypeVar("T")


class DropOldestQueue(Generic[T]):
    """Bounded FIFO for one producer that must never wait on its consumer(s).

    ``put`` always succeeds at once; if the queue is full it first removes the oldest item and returns
    it (the caller counts it). ``close()`` marks the end: once the remaining items are taken, ``get``
    raises ``EOFError`` instead of waiting.
    """

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be >= 1, got {maxsize}")
        self.maxsize = maxsize
        self._items: collections.deque[T] = collections.deque()
        self._cond = threading.Condition()
        self._closed = False
        self.dropped = 0

    def put(self, item: T) -> T | None:
        """Append ``item`` without blocking; returns the item dropped to make room, if any."""
        with self._cond:
            if self._closed:
                raise RuntimeError("put() on a closed DropOldestQueue")
            dropped = None
            if len(self._items) >= self.maxsize:
                dropped = self._items.popleft()
                self.dropped += 1
            self._items.append(item)
            self._cond.notify()
            return dropped

    def get(self, timeout: float | None = None) -> T:
        """Oldest item; waits up to ``timeout`` seconds (None: forever).

        Raises:
            queue.Empty: nothing arrived within ``timeout``.
            EOFError: the queue is closed and empty.
        """
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        with self._cond:
            while not self._items:
                if self._closed:
                    raise EOFError("queue closed")
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise queue.Empty
                self._cond.wait(remaining)
            item = self._items.popleft()
            self._cond.notify_all()  # a producer may be waiting for room
            return item

    def get_nowait(self) -> T:
        """Like ``get(timeout=0)``."""
        return self.get(timeout=0.0)

    def drain(self, limit: int | None = None) -> list[T]:
        """Take every item now queued, or the oldest ``limit`` of them (oldest first), without waiting."""
        with self._cond:
            count = len(self._items) if limit is None else min(max(limit, 0), len(self._items))
            items = [self._items.popleft() for _ in range(count)]
            self._cond.notify_all()
            return items

    def wait_for_room(self, stop: threading.Event, poll_s: float = 0.1) -> bool:
        """Blocks until an item can be put without dropping one; False if ``stop`` was set first."""
        with self._cond:
            while len(self._items) >= self.maxsize and not self._closed:
                if stop.is_set():
                    return False
                self._cond.wait(poll_s)
            return True

    def put_waiting(self, item: T, stop: threading.Event, poll_s: float = 0.1) -> bool:
        """Append ``item`` once there is room: nothing is ever dropped, the producer waits instead (backpressure).
        False, the item not taken, if ``stop`` was set first. RuntimeError when closed."""
        with self._cond:
            while len(self._items) >= self.maxsize and not self._closed:
                if stop.is_set():
                    return False
                self._cond.wait(poll_s)
            if self._closed:
                raise RuntimeError("put_waiting() on a closed DropOldestQueue")
            self._items.append(item)
            self._cond.notify_all()  # the consumer, not only another producer waiting for room
            return True

    def close(self) -> None:
        """No more puts; wakes waiting consumers once the queue is empty."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed

    def qsize(self) -> int:
        with self._cond:
            return len(self._items)
