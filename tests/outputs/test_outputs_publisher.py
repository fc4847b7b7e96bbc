"""The output publisher: the bus's thread only queues (bounded, oldest dropped and counted), the publisher's
own thread feeds every sink, a failing sink is reported and does not stop the others."""

from __future__ import annotations

import threading

from bus import EventBus
from bus.worker import report_due
from outputs import OutputPublisher
from tests.support.event_helpers import make_event

WAIT_S = 10.0


class RecordingSink:
    def __init__(self, name: str = "recorder", fail: bool = False) -> None:
        self.name = name
        self.fail = fail
        self.events: list[dict] = []
        self.started = self.closed = False
        self.got = threading.Condition()
        self.dropped = 0

    def start(self) -> None:
        self.started = True

    def handle(self, event: dict) -> None:
        if self.fail:
            raise RuntimeError("sink is broken")
        with self.got:
            self.events.append(event)
            self.got.notify_all()

    def close(self, timeout: float) -> None:
        self.closed = True

    def wait_for(self, n: int) -> list[dict]:
        with self.got:
            assert self.got.wait_for(lambda: len(self.events) >= n, WAIT_S), f"{len(self.events)} of {n} events"
            return list(self.events)


def answer(round_: int) -> dict:
    return make_event("answer", stream="door", round=round_, stream_time=float(round_), question="q", answer="a")


def test_report_due_only_for_new_drops_and_not_too_often():
    assert report_due(dropped=3, reported=0, now=100.0, last_report=float("-inf"), every_s=10.0)
    assert not report_due(dropped=3, reported=3, now=200.0, last_report=100.0, every_s=10.0)
    assert not report_due(dropped=5, reported=3, now=105.0, last_report=100.0, every_s=10.0)
    assert report_due(dropped=5, reported=3, now=110.0, last_report=100.0, every_s=10.0)


def test_full_queue_drops_the_oldest_counts_and_reports():
    sink, errors = RecordingSink(), []
    publisher = OutputPublisher([sink], on_error=errors.append, queue_size=3)
    for i in range(1, 6):  # the thread is not started yet: nothing is taken out
        publisher(answer(i))
    publisher(make_event("error", stream=None, where="x", message="not an output"))  # never queued
    assert publisher.dropped == 2
    publisher.start()
    try:
        got = sink.wait_for(3)
    finally:
        publisher.close(timeout=5.0)
    assert [e.round for e in got] == [3, 4, 5]
    assert any("2 events dropped" in message for message in errors), errors
    assert sink.started and sink.closed


def test_a_failing_sink_is_reported_and_the_others_still_get_every_event():
    broken, good, errors = RecordingSink("broken", fail=True), RecordingSink("good"), []
    bus = EventBus()
    publisher = OutputPublisher([broken, good], on_error=errors.append)
    bus.subscribe(publisher)
    publisher.start()
    try:
        for i in range(3):
            bus.publish(answer(i))
        assert [e.round for e in good.wait_for(3)] == [0, 1, 2]
    finally:
        bus.unsubscribe(publisher)
        publisher.close(timeout=5.0)
    assert sum("output broken failed on a answer event (RuntimeError)" in m for m in errors) == 3, errors
    assert not any("sink is broken" in m for m in errors)  # an exception's text may hold anything: type only


def test_close_delivers_what_is_queued_and_joins():
    sink = RecordingSink()
    publisher = OutputPublisher([sink])
    for i in range(10):
        publisher(answer(i))
    publisher.start()
    publisher.close(timeout=5.0)
    assert len(sink.events) == 10
    assert not publisher.worker._thread.is_alive()
