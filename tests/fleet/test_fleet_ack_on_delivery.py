"""The head acknowledges a spooled event on delivery, not on hand-off (fleet/delivery.py, bus/receipt.py), without
Ray: the head's outputs (the publisher and its sinks: a slow one, a webhook that gives up, one that wants only
alerts) hold each event's receipt until they are done with it, and the marks sent back to the host never pass an
event some output still holds, however the outputs finish out of order."""

from __future__ import annotations

import threading
import time

import pytest

from bus import Alert, Event, EventBus
from bus.receipt import Receipt
from fleet.delivery import Delivery, event_key
from fleet.wire import from_wire, to_wire
from outputs import OutputPublisher, WebhookConfig, WebhookSink
from outputs.queued_sink import QueuedSink
from tests.support.event_helpers import make_event
from tests.support.webhook_receiver import start

WAIT_S = 10.0
SPOOL = "a-host-0-4242-0badcafe"


class GatedSink:
    """A sink (`outputs.queued_sink.SendSink`) whose `send` waits for its gate: a slow receiver. `kinds`: the event
    types it wants."""

    def __init__(self, name: str, kinds: tuple[type[Event], ...] = (Event,), gate: threading.Event | None = None):
        self.name, self.kinds = name, kinds
        self.gate = gate or threading.Event()
        self.sent: list[Event] = []
        self.entered = threading.Event()

    def wants(self, event: Event) -> bool:
        return isinstance(event, self.kinds)

    def send(self, event: Event) -> None:
        self.entered.set()
        assert self.gate.wait(WAIT_S * 3), "the test never opened the gate"
        self.sent.append(event)


def answer(round_: int) -> Event:
    return make_event(
        "answer", stream="door", round=round_, stream_time=float(round_), question=f"q{round_}", answer="a"
    )


def alert_begin() -> Event:
    return make_event("alert", stream="door", id="door-person-1", alert="person", state="begin", p_yes=0.9)


def spooled(event: Event, seq: int) -> dict:
    """The wire dict a host drains: the event and its place in the spool."""
    return {**to_wire(event), "_spool": [SPOOL, seq]}


def hand(delivery: Delivery, bus: EventBus, items: list[dict]) -> None:
    """What the coordinator does with a drain (fleet/coordinator.py `_publish_items`)."""
    for item in items:
        if delivery.fresh("a-host-0", item):
            delivery.publish(bus, item, from_wire(item))


def wait_until(check, what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        assert time.monotonic() < deadline, f"no {what} within {WAIT_S} s"
        time.sleep(0.01)


def outputs(sinks: list) -> tuple[EventBus, OutputPublisher]:
    bus, publisher = EventBus(), OutputPublisher(sinks)
    bus.subscribe(publisher)
    publisher.start()
    return bus, publisher


def test_a_receipt_is_done_once_when_its_last_hold_goes():
    done = []
    receipt = Receipt("s:1", lambda: done.append(1))
    receipt.hold()
    receipt.hold()
    receipt.release()  # the publisher's own
    receipt.release()
    assert not done and not receipt.done
    receipt.release()
    assert done == [1] and receipt.done
    with pytest.raises(RuntimeError, match="released more often"):
        receipt.release()
    with pytest.raises(RuntimeError, match="held after"):
        receipt.hold()


def test_an_event_in_a_slow_output_is_not_acknowledged_until_it_is_delivered():
    slow = GatedSink("slow")
    delivery = Delivery()
    bus, publisher = outputs([QueuedSink(slow)])
    try:
        hand(delivery, bus, [spooled(answer(1), 1)])
        assert slow.entered.wait(WAIT_S)  # handed to the sink: on main this was the acknowledgement
        assert delivery.acks_for("a-host-0") == {} and delivery.outstanding() == 1
        hand(delivery, bus, [spooled(answer(1), 1)])  # a replay of it meanwhile is still a repeat
        assert delivery.repeats == 1
        slow.gate.set()
        wait_until(lambda: delivery.acks_for("a-host-0") == {SPOOL: 1}, "acknowledgement after the delivery")
        assert delivery.outstanding() == 0 and [e.round for e in slow.sent] == [1]
        assert slow.sent[0].receipt.key == event_key(SPOOL, 1)
    finally:
        slow.gate.set()
        publisher.close(timeout=WAIT_S)


def test_an_output_that_gives_up_lets_the_mark_advance(receivers):
    refused = start(receivers, statuses=(503, 503))  # every try of the first request fails: retries spent
    errors: list[str] = []
    webhook = WebhookSink(WebhookConfig(refused.url, retries=1, backoff_s=0.0), on_error=errors.append)
    slow = GatedSink("slow", gate=(queue_gate := threading.Event()))
    delivery = Delivery()
    bus, publisher = outputs([webhook, QueuedSink(slow, queue_size=1)])
    try:
        hand(delivery, bus, [spooled(answer(1), 1)])
        assert slow.entered.wait(WAIT_S)
        hand(delivery, bus, [spooled(answer(2), 2), spooled(answer(3), 3)])  # 2 is dropped from the full queue
        wait_until(lambda: webhook.failed == 1 and webhook.delivered == 2, "the webhook giving up on 1, then 2, 3")
        assert delivery.acks_for("a-host-0") == {}  # 1 is still in the slow sink
        queue_gate.set()
        wait_until(lambda: delivery.acks_for("a-host-0") == {SPOOL: 3}, "the mark past the given up and dropped")
        assert [e.round for e in slow.sent] == [1, 3] and any("gave up on a request" in e for e in errors)
    finally:
        queue_gate.set()
        publisher.close(timeout=WAIT_S)


def test_the_mark_never_passes_an_event_an_output_still_holds_when_outputs_finish_out_of_order():
    alerts_only = GatedSink("alerts", kinds=(Alert,))  # like ntfy: only the alert; slow
    everything = GatedSink("all")
    everything.gate.set()
    delivery = Delivery()
    bus, publisher = outputs([QueuedSink(alerts_only), QueuedSink(everything)])
    try:
        hand(delivery, bus, [spooled(alert_begin(), 1), spooled(answer(2), 2), spooled(answer(3), 3)])
        wait_until(lambda: len(everything.sent) == 3 and delivery.outstanding() == 1, "2 and 3 done, 1 held")
        assert delivery.acknowledged(SPOOL) == 0 and delivery.acks_for("a-host-0") == {}
        hand(delivery, bus, [spooled(answer(4), 4)])
        wait_until(lambda: len(everything.sent) == 4 and delivery.outstanding() == 1, "4 done too")
        assert delivery.acknowledged(SPOOL) == 0
        alerts_only.gate.set()
        wait_until(lambda: delivery.acks_for("a-host-0") == {SPOOL: 4}, "the mark past all four")
    finally:
        alerts_only.gate.set()
        publisher.close(timeout=WAIT_S)


def test_marks_follow_the_oldest_held_event_and_unspooled_events_need_none():
    delivery, bus = Delivery(), EventBus()
    held: list[Event] = []
    bus.subscribe(lambda event: (event.receipt.hold(), held.append(event)) if event.receipt else None)
    hand(delivery, bus, [spooled(answer(i), i) for i in (5, 6, 7)])  # 1-4 acknowledged by an earlier head
    hand(delivery, bus, [to_wire(answer(8))])  # never spooled (as a clip or a status): no receipt
    assert [e.receipt.key for e in held] == [event_key(SPOOL, i) for i in (5, 6, 7)]
    for event, mark in zip(held[::-1], (4, 4, 7), strict=True):  # 7 and 6 finish before 5
        event.receipt.release()
        assert delivery.acknowledged(SPOOL) == mark
    assert delivery.settle(0) == 0
