"""Failed logins, per client address: the `free`-th failure in a row and every one after it lock that address out
for a delay that doubles each time (up to `max_lock_s`); a success clears it. The table is bounded."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class _Record:
    failures: int = 0
    locked_until: float = 0.0
    last: float = 0.0


class LoginThrottle:
    """`locked_for(client)` seconds left (0: may try); `failed(client)` / `succeeded(client)` after an attempt.

    free: failures in a row that bring the first lock; first_lock_s: its length (seconds); each further failure
    doubles it, up to max_lock_s. A client quiet for `forget_s` starts afresh; at most `max_clients` are
    remembered (the longest quiet are forgotten first). `clock`: seconds, monotonic (tests pass their own)."""

    def __init__(
        self,
        free: int = 5,
        first_lock_s: float = 2.0,
        max_lock_s: float = 300.0,
        forget_s: float = 3600.0,
        max_clients: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if free < 1 or first_lock_s <= 0 or max_lock_s < first_lock_s or max_clients < 1:
            raise ValueError("LoginThrottle needs free >= 1, 0 < first_lock_s <= max_lock_s, max_clients >= 1")
        self.free = free
        self.first_lock_s = first_lock_s
        self.max_lock_s = max_lock_s
        self.forget_s = forget_s
        self.max_clients = max_clients
        self.clock = clock
        self._records: OrderedDict[str, _Record] = OrderedDict()
        self._lock = threading.Lock()

    def locked_for(self, client: str) -> float:
        with self._lock:
            record = self._current(client)
            return 0.0 if record is None else max(record.locked_until - self.clock(), 0.0)

    def failed(self, client: str) -> None:
        with self._lock:
            now = self.clock()
            record = self._current(client) or _Record()
            record.failures += 1
            record.last = now
            beyond = record.failures - self.free
            if beyond >= 0:
                record.locked_until = now + min(self.first_lock_s * 2 ** min(beyond, 30), self.max_lock_s)
            self._records[client] = record
            self._records.move_to_end(client)
            while len(self._records) > self.max_clients:
                self._records.popitem(last=False)

    def succeeded(self, client: str) -> None:
        with self._lock:
            self._records.pop(client, None)

    def _current(self, client: str) -> _Record | None:
        record = self._records.get(client)
        if record is not None and self.clock() - record.last > self.forget_s and self.clock() >= record.locked_until:
            del self._records[client]
            return None
        return record
