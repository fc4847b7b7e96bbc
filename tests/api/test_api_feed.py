"""The events feed's bounds (api/feed.py): the bus's thread never waits for a client; a client that does not
read is dropped once its mailbox is full, and what it lost is counted; other clients get everything; a client
coming back with Last-Event-ID gets what the replay buffer still holds and is told how much it missed."""

import asyncio
import threading
import time

import pytest

from api.feed import EventFeed, FeedFull
from bus import ClipEvent, Status


def clip(index: int, stream: str = "door") -> ClipEvent:
    return ClipEvent(stream=stream, index=index, stream_time=float(index))


def test_a_client_that_never_reads_is_dropped_and_counted_and_never_holds_the_publisher():
    async def scenario():
        feed = EventFeed(replay=100, queue=64, max_clients=4)
        loop = asyncio.get_running_loop()
        stuck, _, _ = feed.subscribe(loop, None, None, None)
        reader, _, _ = feed.subscribe(loop, frozenset({"clip"}), "door", None)
        got: list[int] = []
        took: list[float] = []

        def publish() -> None:  # the model worker's side
            for k in range(1000):
                start = time.perf_counter()
                feed(clip(k))
                feed(Status(message="noise"))  # filtered out for the reader
                took.append(time.perf_counter() - start)
                time.sleep(0.0005)  # a model's pace (clips and pieces), so the reading client keeps up

        worker = threading.Thread(target=publish)
        worker.start()
        while len(got) < 1000 and (worker.is_alive() or got[-1:] != [1000]):
            items = await reader.mailbox.take(0.05)
            got += [item.id for item in items]
            if not worker.is_alive() and not items:
                break
        worker.join()
        return feed, stuck, reader, got, took

    feed, stuck, reader, got, took = asyncio.run(scenario())
    assert stuck.dropped and not reader.dropped
    assert feed.stats.dropped_clients == 1 and feed.stats.lost_events == 65  # 64 held + the one that did not fit
    assert feed.stats.clients == 1 and feed.stats.events == 2000
    assert got == list(range(1, 2000, 2))  # every clip, in order, no status
    assert max(took) < 0.5  # never waited on a client (a generous bound: this is a check, not a benchmark)


def test_resuming_replays_what_is_kept_and_counts_what_is_not():
    async def scenario():
        feed = EventFeed(replay=10, queue=100, max_clients=2)
        for k in range(30):
            feed(clip(k))
        loop = asyncio.get_running_loop()
        recent, kept, missed = feed.subscribe(loop, None, None, last_id=25)
        old, kept_old, missed_old = feed.subscribe(loop, None, None, last_id=5)
        with pytest.raises(FeedFull):
            feed.subscribe(loop, None, None, None)
        return kept, missed, kept_old, missed_old, feed

    kept, missed, kept_old, missed_old, feed = asyncio.run(scenario())
    assert [i.id for i in kept] == [26, 27, 28, 29, 30] and missed == 0
    assert [i.id for i in kept_old] == list(range(21, 31)) and missed_old == 15  # 6..20 are gone
    assert feed.stats.refused_clients == 1
