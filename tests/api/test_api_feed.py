"""The events feed's bounds (api/feed.py): the bus's thread never waits for a client; a client that does not
read is dropped once its mailbox is full, and what it lost is counted; other clients get everything; a client
coming back with Last-Event-ID gets what the replay buffer still holds and is told how much it missed, and one
coming back with an id of an earlier run is told the feed started again."""

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
        feed = EventFeed(replay=100, queue=64, max_clients=4, first_id=1)
        loop = asyncio.get_running_loop()
        stuck, _ = feed.subscribe(loop, None, None, None)
        reader, _ = feed.subscribe(loop, frozenset({"clip"}), "door", None)
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
        feed = EventFeed(replay=10, queue=100, max_clients=2, first_id=1)
        for k in range(30):
            feed(clip(k))
        loop = asyncio.get_running_loop()
        _, recent = feed.subscribe(loop, None, None, last_id=25)
        _, old = feed.subscribe(loop, None, None, last_id=5)
        with pytest.raises(FeedFull):
            feed.subscribe(loop, None, None, None)
        return recent, old, feed

    recent, old, feed = asyncio.run(scenario())
    assert [i.id for i in recent.kept] == [26, 27, 28, 29, 30] and recent.missed == 0 and not recent.reset
    assert [i.id for i in old.kept] == list(range(21, 31)) and old.missed == 15 and not old.reset  # 6..20 gone
    assert feed.stats.refused_clients == 1


def test_ids_grow_across_restarts_and_an_earlier_runs_id_is_a_reset():
    """A restarted assistant numbers on from above every id of the run before (even within one millisecond), so
    a client resuming with an id of that run is told so and gets this run's kept events from its start, with a
    gap for those no longer kept; an id from neither run (from the future) is a reset too."""

    async def scenario():
        loop = asyncio.get_running_loop()
        before = EventFeed(replay=10)
        for k in range(5):
            before(clip(k))
        after = EventFeed(replay=3)  # the next run
        for k in range(5):
            after(clip(k))
        _, earlier = after.subscribe(loop, None, None, last_id=before._items[-1].id)
        _, future = after.subscribe(loop, None, None, last_id=after._items[-1].id + 10**6)
        _, now = after.subscribe(loop, None, None, last_id=after._items[-1].id)
        return before, after, earlier, future, now

    before, after, earlier, future, now = asyncio.run(scenario())
    assert after.first_id > before._items[-1].id
    assert earlier.reset and [i.id for i in earlier.kept] == [i.id for i in after._items] and earlier.missed == 2
    assert future.reset and future.kept == earlier.kept
    assert not now.reset and now.kept == [] and now.missed == 0


def test_one_token_holds_at_most_half_of_the_feeds():
    """With 4 feeds allowed, the reader token gets 2 and is refused the third; another token still gets the rest;
    without tokens (owner None) there is no share."""

    async def scenario():
        feed = EventFeed(replay=10, queue=10, max_clients=4, first_id=1)
        loop = asyncio.get_running_loop()
        for _ in range(2):
            feed.subscribe(loop, None, None, None, owner="dashboard")
        with pytest.raises(FeedFull, match="this token has 2 event feeds open"):
            feed.subscribe(loop, None, None, None, owner="dashboard")
        phone = [feed.subscribe(loop, None, None, None, owner="phone")[0] for _ in range(2)]
        feed.unsubscribe(phone[0])
        feed.subscribe(loop, None, None, None, owner=None)
        return feed

    feed = asyncio.run(scenario())
    assert feed.stats.clients == 4 and feed.stats.refused_clients == 1
