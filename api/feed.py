"""The events feed: every event of the bus as its record (bus.records), numbered, kept in a bounded replay
buffer and handed to each SSE client through its own bounded mailbox. The bus calls `EventFeed` on the model
worker's thread: it serialises the record once and never waits; a client whose mailbox is full (it reads slowly
or never) is dropped and counted, and loses what it did not read (it may come back with `Last-Event-ID`).

Event ids are whole numbers that keep growing across restarts: a run numbers its events from its start time in
milliseconds times 1,000 (a run would need a million events a second to reach the next run's first id). So an id
of an earlier run is recognised: that client is told the feed started again (`reset`) and gets all this run has
kept, instead of events after a number that meant something else."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from api.mailbox import Mailbox
from bus import Event, to_record


@dataclass(frozen=True)
class FeedItem:
    id: int
    type: str
    stream: str | None
    data: str  # the record as JSON


@dataclass
class FeedClient:
    """One SSE client: what it wants (types None: all; stream None: all) and its mailbox."""

    mailbox: Mailbox
    types: frozenset[str] | None = None
    stream: str | None = None
    dropped: bool = False
    owner: str | None = None  # the token's name (None: no token is needed here)

    def wants(self, item: FeedItem) -> bool:
        return (self.types is None or item.type in self.types) and (self.stream is None or item.stream == self.stream)


@dataclass
class FeedStats:
    events: int = 0
    clients: int = 0
    dropped_clients: int = 0  # clients dropped because they did not keep up
    lost_events: int = 0  # events those clients did not get
    refused_clients: int = 0  # clients refused for --api-sse-clients


_bases = {"last": 0}
_bases_lock = threading.Lock()
IDS_PER_MS = 1000


def run_first_id() -> int:
    """The first event id of a feed started now: above every id a feed started earlier gave (this process's
    too, even within one millisecond)."""
    with _bases_lock:
        base = max(int(time.time() * 1000) * IDS_PER_MS, _bases["last"] + IDS_PER_MS)
        _bases["last"] = base
        return base


@dataclass(frozen=True)
class Resume:
    """What a new client gets first: the kept events it wants, how many it missed that are no longer kept, and
    whether its Last-Event-ID was of another run (`reset`: it gets this run's kept events from the start)."""

    kept: list[FeedItem]
    missed: int = 0
    reset: bool = False


class FeedFull(Exception):
    """As many SSE clients as allowed are connected."""


@dataclass
class EventFeed:
    """replay: events kept for clients coming back with Last-Event-ID. queue: events waiting per client before
    it is dropped. max_clients: SSE clients at once; one token may hold at most half of them (at least one), so
    that one reader never takes every feed."""

    replay: int = 1000
    queue: int = 256
    max_clients: int = 16
    stats: FeedStats = field(default_factory=FeedStats)
    first_id: int = field(default_factory=run_first_id)

    def __post_init__(self) -> None:
        self._items: deque[FeedItem] = deque(maxlen=self.replay)
        self._clients: list[FeedClient] = []
        self._lock = threading.Lock()
        self._next = self.first_id

    def __call__(self, event: Event) -> None:
        """Bus subscriber (the model worker's thread): never blocks."""
        data = json.dumps(to_record(event), ensure_ascii=False, default=str)
        with self._lock:
            item = FeedItem(self._next, event.TYPE, event.stream, data)
            self._next += 1
            self._items.append(item)
            self.stats.events += 1
            clients = list(self._clients)
        for client in clients:
            if client.wants(item) and not client.mailbox.put(item):
                self._drop(client)

    def subscribe(
        self,
        loop: asyncio.AbstractEventLoop,
        types: frozenset[str] | None,
        stream: str | None,
        last_id: int | None,
        owner: str | None = None,
    ) -> tuple[FeedClient, Resume]:
        """A new client and what it gets first (Resume): after `last_id`, the kept events it wants (None: none).
        An id this run never gave (an earlier run's, or one from the future) is a reset. FeedFull when
        max_clients are connected, or `owner` (a token's name) holds its share of them."""
        client = FeedClient(Mailbox(loop, self.queue), types, stream, owner=owner)
        with self._lock:
            if len(self._clients) >= self.max_clients:
                self.stats.refused_clients += 1
                raise FeedFull(f"{self.max_clients} event feeds are open, the most allowed (--api-sse-clients)")
            share = max(1, self.max_clients // 2)
            if owner is not None and sum(1 for c in self._clients if c.owner == owner) >= share:
                self.stats.refused_clients += 1
                raise FeedFull(
                    f"this token has {share} event feeds open, the most one token may (half of --api-sse-clients); "
                    "close one first"
                )
            self._clients.append(client)
            self.stats.clients = len(self._clients)
            if last_id is None:
                return client, Resume([])
            reset = not self.first_id - 1 <= last_id < self._next
            after = self.first_id - 1 if reset else last_id
            kept = [item for item in self._items if item.id > after and client.wants(item)]
            oldest = self._items[0].id if self._items else self._next
        return client, Resume(kept, max(oldest - after - 1, 0), reset)

    def unsubscribe(self, client: FeedClient) -> None:
        client.mailbox.close()
        with self._lock:
            if client in self._clients:
                self._clients.remove(client)
            self.stats.clients = len(self._clients)

    def _drop(self, client: FeedClient) -> None:
        """A client that did not keep up: it gets nothing more; the event that did not fit and those it had not
        read yet are counted as lost."""
        held = client.mailbox.close()
        with self._lock:
            if client.dropped:
                return
            client.dropped = True
            self.stats.dropped_clients += 1
            self.stats.lost_events += held + 1
            if client in self._clients:
                self._clients.remove(client)
            self.stats.clients = len(self._clients)
