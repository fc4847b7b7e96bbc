"""A bounded hand-over from the model worker's thread to one HTTP client's coroutine: `put` never blocks
(a full box refuses and remembers that it overflowed); `take` waits on the event loop for what came."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import Any


class Mailbox:
    def __init__(self, loop: asyncio.AbstractEventLoop, maxlen: int) -> None:
        self._loop = loop
        self._maxlen = maxlen
        self._items: deque[Any] = deque()
        self._lock = threading.Lock()
        self._ready = asyncio.Event()
        self._signalled = False
        self.overflowed = False
        self.closed = False

    def put(self, item: Any) -> bool:
        """Any thread, never blocks. False when the box is closed or full (then `overflowed` is set)."""
        with self._lock:
            if self.closed:
                return False
            if len(self._items) >= self._maxlen:
                self.overflowed = True
                accepted = False
            else:
                self._items.append(item)
                accepted = True
            wake, self._signalled = not self._signalled, True
        if wake:
            try:
                self._loop.call_soon_threadsafe(self._ready.set)
            except RuntimeError:  # the loop has closed: nobody reads any more
                pass
        return accepted

    async def take(self, timeout: float) -> list[Any]:
        """What came (oldest first), waiting up to `timeout` seconds for something; [] when nothing did."""
        if not self._items:
            try:
                await asyncio.wait_for(self._ready.wait(), timeout)
            except TimeoutError:
                pass
        self._ready.clear()
        with self._lock:
            items, self._signalled = list(self._items), False
            self._items.clear()
        return items

    def close(self) -> int:
        """Closes the box; returns how many items it still held (now discarded)."""
        with self._lock:
            self.closed, held = True, len(self._items)
            self._items.clear()
        try:
            self._loop.call_soon_threadsafe(self._ready.set)
        except RuntimeError:
            pass
        return held
