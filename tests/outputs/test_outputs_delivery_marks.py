"""A fleet's head that dies while one output retries does not make the others repeat: each output marks on disk
what it delivered (bus/delivery_marks.py) and skips a replayed event it had delivered; one that had not delivered
it gets it. A real mosquitto broker and a real HTTP receiver on 127.0.0.1; the head's two runs are two sets of
sinks over the same folder."""

from __future__ import annotations

import dataclasses
import threading
import time

from bus import Event
from bus.delivery_marks import DeliveryMarks
from bus.receipt import Receipt
from outputs import MqttConfig, MqttSink, WebhookConfig, WebhookSink
from outputs.queued_sink import QueuedSink
from tests.support.event_helpers import make_event
from tests.support.mqtt_broker import MosquittoBroker
from tests.support.mqtt_watcher import Watcher
from tests.support.webhook_receiver import start

WAIT_S = 10.0
ANSWERS = "edge-assistant/door/answer"


def answer(round_: int, key: str | None, marks: DeliveryMarks | None) -> tuple[Event, threading.Event]:
    """An answer as a head publishes a spooled one: with a receipt (`key`), its publisher's hold released by the
    caller once handed to the sinks; the flag is set when every sink is done with it."""
    event = make_event("answer", stream="door", round=round_, stream_time=1.0, question=f"q{round_}", answer="a")
    done = threading.Event()
    if key is None:
        return event, done
    return dataclasses.replace(event, receipt=Receipt(key, done.set, marks)), done


def connected(sink: MqttSink) -> MqttSink:
    deadline = time.monotonic() + WAIT_S
    while not sink.connected:
        assert time.monotonic() < deadline, "the sink did not connect"
        time.sleep(0.02)
    return sink


def run_head(marks: DeliveryMarks, broker_url: str, hook_url: str, events: list[Event]) -> tuple[MqttSink, WebhookSink]:
    """One run of the head's outputs: both sinks get `events` (each with a receipt); the caller closes them."""
    mqtt = connected(_started(MqttSink(MqttConfig(broker_url), streams=["door"])))
    hook = _started(WebhookSink(WebhookConfig(hook_url, retries=0)))
    for event in events:
        mqtt.handle(event)
        hook.handle(event)
        event.receipt.release()  # the publisher's own hold: both sinks took it
    return mqtt, hook


def _started(sink):
    sink.start()
    return sink


def test_a_replay_goes_only_to_the_output_that_had_not_delivered_it(tmp_path, receivers):
    folder = tmp_path / "fleet-head"
    with MosquittoBroker(tmp_path) as broker:
        watcher = Watcher(broker.port)
        try:
            # run 1: the broker takes the answer at once; the webhook answers 503 and is given up on
            failing = start(receivers, statuses=(503,))
            marks = DeliveryMarks(folder)
            first, first_done = answer(1, "spool-a:1", marks)
            mqtt, hook = run_head(marks, broker.url, failing.url, [first])
            assert first_done.wait(WAIT_S)
            assert hook.failed == 1 and watcher.wait_topic(ANSWERS).json()["event_key"] == "spool-a:1"
            mqtt.close(timeout=2.0)
            hook.close(timeout=2.0)
            marks.close()

            # run 2 (the next head): the host replays spool-a:1; a new answer comes after it
            receiver = start(receivers)
            marks = DeliveryMarks(folder)
            replay, replay_done = answer(1, "spool-a:1", marks)
            fresh, fresh_done = answer(2, "spool-a:2", marks)
            mqtt, hook = run_head(marks, broker.url, receiver.url, [replay, fresh])
            assert replay_done.wait(WAIT_S) and fresh_done.wait(WAIT_S)
            requests = receiver.wait_for(2)
            mqtt.close(timeout=2.0)
            hook.close(timeout=2.0)
            marks.close()
        finally:
            watcher.close()
    # the webhook, which never delivered spool-a:1, gets it now, and the new one
    assert [headers["Idempotency-Key"] for headers, _ in requests] == ["spool-a:1", "spool-a:2"]
    # the broker got spool-a:1 once: the second run sent only spool-a:2 (in order: a repeat would come before it)
    keys = [m.json()["event_key"] for m in watcher.messages if m.topic == ANSWERS]
    assert keys == ["spool-a:1", "spool-a:2"], keys
    assert mqtt.repeats_skipped == 1 and hook.repeats_skipped == 0


def test_without_marks_or_a_receipt_nothing_is_skipped(tmp_path, receivers):
    """An event without a receipt (a one-box run) and a receipt without marks are always sent."""
    receiver = start(receivers)
    hook = _started(WebhookSink(WebhookConfig(receiver.url)))
    try:
        plain, _ = answer(1, None, None)
        keyed, done = answer(2, "spool-b:1", None)
        for event in (plain, plain, keyed, keyed):
            hook.handle(event)
        keyed.receipt.release()
        assert len(receiver.wait_for(4)) == 4 and done.wait(WAIT_S)
    finally:
        hook.close(timeout=2.0)
    assert hook.repeats_skipped == 0


class Recorder:
    """A `SendSink` (what an ntfy-like output writes) that records what it sent; `fail` makes it raise."""

    def __init__(self, name: str, mark_name: str, fail: bool = False) -> None:
        self.name, self.mark_name, self.fail = name, mark_name, fail
        self.sent: list[str] = []

    def wants(self, event: Event) -> bool:
        return True

    def send(self, event: Event) -> None:
        if self.fail:
            raise OSError("unreachable")
        self.sent.append(event.receipt.key)


def send_once(recorder: Recorder, marks: DeliveryMarks) -> None:
    """One run of a queued sink over `recorder`: the spooled answer spool-c:1, until its receipt is done."""
    sink = _started(QueuedSink(recorder))
    event, done = answer(1, "spool-c:1", marks)
    sink.handle(event)
    event.receipt.release()
    assert done.wait(WAIT_S)
    sink.close(timeout=2.0)


def test_a_queued_sink_marks_what_it_sent_by_its_mark_name(tmp_path):
    marks = DeliveryMarks(tmp_path / "fleet-head")
    sent_before, failed_before = Recorder("ntfy a/…", "ntfy a/topic-1"), Recorder("ntfy a/…", "ntfy a/topic-2", True)
    send_once(sent_before, marks)
    send_once(failed_before, marks)
    # the next run: the one that sent it skips the replay; the other (same display name, another topic) sends it
    again = [Recorder("ntfy a/…", "ntfy a/topic-1"), Recorder("ntfy a/…", "ntfy a/topic-2")]
    for recorder in again:
        send_once(recorder, marks)
    marks.close()
    assert sent_before.sent == ["spool-c:1"] and again[0].sent == [] and again[1].sent == ["spool-c:1"]
