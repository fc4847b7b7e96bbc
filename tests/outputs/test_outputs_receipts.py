"""Outputs and an event's receipt (bus/receipt.py: a fleet's spooled alerts and answers): the broker's sink holds it
until the broker acknowledged the message (a frozen broker acknowledges nothing), the timeline until its row is
committed; the broker's payload and the webhook's body carry the event's durable key, the webhook's request its
`Idempotency-Key` header; an event without a receipt carries none."""

from __future__ import annotations

import dataclasses
import json
import threading
import time

from bus import Event
from bus.receipt import Receipt
from outputs import MqttConfig, MqttSink, WebhookConfig, WebhookSink
from outputs.webhook import IDEMPOTENCY_HEADER
from tests.support.event_helpers import make_event
from tests.support.mqtt_broker import MosquittoBroker
from tests.support.mqtt_watcher import Watcher
from tests.support.webhook_receiver import start
from timeline import TimelineConfig, TimelineWriter

WAIT_S = 10.0


def answer(round_: int) -> Event:
    return make_event("answer", stream="door", round=round_, stream_time=1.0, question=f"q{round_}", answer="a")


def with_receipt(event: Event, key: str) -> tuple[Event, threading.Event]:
    """The event with a receipt whose publisher's hold is released at once (as `bus.publish` returned), and the
    flag its completion sets."""
    done = threading.Event()
    receipt = Receipt(key, done.set)
    event = dataclasses.replace(event, receipt=receipt)
    return event, done


def test_webhooks_carry_the_key_in_a_header_and_the_body(receivers):
    receiver = start(receivers)
    sink = WebhookSink(WebhookConfig(receiver.url))
    keyed, done = with_receipt(answer(1), "a-0-77-cafe:5")
    sink.start()
    try:
        sink.handle(keyed)
        keyed.receipt.release()
        sink.handle(answer(2))
        (first_headers, first), (second_headers, second) = receiver.wait_for(2)
    finally:
        sink.close(timeout=WAIT_S)
    assert done.wait(WAIT_S)
    assert first_headers[IDEMPOTENCY_HEADER] == "a-0-77-cafe:5" and json.loads(first)["event_key"] == "a-0-77-cafe:5"
    assert IDEMPOTENCY_HEADER not in second_headers and "event_key" not in json.loads(second)


def test_the_broker_sink_holds_an_event_until_the_broker_acknowledged_it(tmp_path):
    with MosquittoBroker(tmp_path) as broker:
        watcher = Watcher(broker.port)
        sink = MqttSink(MqttConfig(broker.url), streams=["door"])
        sink.start()
        try:
            deadline = time.monotonic() + WAIT_S
            while not sink.connected:
                assert time.monotonic() < deadline, "the sink did not connect"
                time.sleep(0.02)
            broker.pause()  # the connection stays; no PUBACK comes
            keyed, done = with_receipt(answer(1), "a-0-77-cafe:6")
            sink.handle(keyed)
            keyed.receipt.release()
            assert not done.wait(1.0), "released before the broker took the message"
            broker.resume()
            assert done.wait(WAIT_S), "not released after the broker acknowledged the message"
            message = watcher.wait_topic("edge-assistant/door/answer")
            assert message.json()["event_key"] == "a-0-77-cafe:6"
        finally:
            broker.resume()
            sink.close(timeout=2.0)
            watcher.close()


def test_the_timeline_lets_go_once_the_row_is_committed(tmp_path):
    path = tmp_path / "timeline.sqlite"
    writer = TimelineWriter(TimelineConfig(path))
    keyed, done = with_receipt(answer(1), "a-0-77-cafe:7")
    writer.start()
    try:
        writer(keyed)
        keyed.receipt.release()
        assert done.wait(WAIT_S)
        assert writer.written == 1  # the row was written before the receipt let go
    finally:
        writer.close(timeout=WAIT_S)
