"""MQTT commands (`--mqtt-commands`, outputs/mqtt_commands.py): the parsing and limits on their own (a fake
assistant behind `outputs.commands.Commands`, a fake clock), then the MQTT sink against a real broker (Debian's
mosquitto on 127.0.0.1) and a real paho publisher and subscriber: the Home Assistant text entity, questions and
watch commands answered on their result topics, hostile commands refused, a flood bounded."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from outputs import MqttConfig, MqttSink
from outputs.commands import BUSY, NOT_READY, CommandError, CommandsSlot
from outputs.discovery import ask_text_config
from outputs.mqtt import max_packet_bytes
from outputs.mqtt_commands import MqttCommands
from tests.support.mqtt_broker import MosquittoBroker
from tests.support.mqtt_watcher import Watcher

WAIT_S = 10.0


class FakeCommands:
    """The assistant as commands see it: records what it was asked; `busy` refuses questions."""

    def __init__(self, streams=("door", "yard")) -> None:
        self.streams = list(streams)
        self.asked: list[tuple[str, str | None, str]] = []
        self.watched: list[dict] = []
        self.busy = False

    def ask(self, question, stream, request):
        if self.busy:
            raise CommandError("busy: try again", BUSY)
        if stream is not None and stream not in self.streams:
            raise CommandError(f"no stream named {stream!r}", "not_found")
        if not question.strip():
            raise ValueError("the question is empty")
        self.asked.append((question, stream, request))
        return [stream] if stream else list(self.streams)

    def watch(self, command):
        self.watched.append(command)
        return {"watches": []} if command["action"] == "list" else {"name": command.get("name")}


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def config(**kwargs) -> MqttConfig:
    return MqttConfig("mqtt://127.0.0.1:1883", commands=True, **kwargs)


def handler(**kwargs):
    fake, clock = FakeCommands(), Clock()
    errors: list[str] = []
    return fake, clock, errors, MqttCommands(config(**kwargs), fake, errors.append, clock=clock)


def result(reply) -> dict:
    return json.loads(reply.payload)


# -- the commands on their own -------------------------------------------------------------------------------


def test_a_question_on_a_streams_ask_topic_is_queued_and_acknowledged():
    fake, _, _, commands = handler()
    reply = commands.handle("edge-assistant/door/ask", b"What is at the door?")
    assert reply.topic == "edge-assistant/ask/result"
    body = result(reply)
    assert body["ok"] is True and body["action"] == "ask" and body["streams"] == ["door"]
    assert body["request"].startswith("mqtt-")
    assert fake.asked == [("What is at the door?", "door", body["request"])]


def test_a_json_question_carries_its_id_into_the_request_and_may_ask_every_stream():
    fake, _, _, commands = handler()
    body = result(commands.handle("edge-assistant/ask", b'{"question": "Anyone?", "id": "k1"}'))
    assert body == {"action": "ask", "ok": True, "request": "mqtt-k1", "streams": ["door", "yard"], "id": "k1"}
    assert fake.asked == [("Anyone?", None, "mqtt-k1")]


@pytest.mark.parametrize(
    ("topic", "payload", "code", "words"),
    [
        ("edge-assistant/ask", b"{not json", "invalid", "not JSON"),
        ("edge-assistant/ask", b"[1, 2]", "invalid", "JSON object"),
        ("edge-assistant/ask", b'{"question": 3}', "invalid", '"question"'),
        ("edge-assistant/ask", b'{"question": "q?", "colour": "red"}', "invalid", "colour"),
        ("edge-assistant/ask", b'{"question": "q?", "id": "a b"}', "invalid", "id must be"),
        ("edge-assistant/ask", b'{"question": "q?", "id": "a\\n"}', "invalid", "id must be"),  # `$` took "a\n"
        ("edge-assistant/ask", b'{"question": "q", "x": ' + b"[" * 8000 + b"]" * 8000 + b"}", "invalid", "nests"),
        ("edge-assistant/ask", b'{"question": "q?", "stream": "garage"}', "not_found", "garage"),
        ("edge-assistant/garage/ask", b"What?", "not_found", "garage"),
        ("edge-assistant/" + "x" * 500 + "/ask", b"What?", "not_found", "too long"),
        ("edge-assistant/door/ask", b"\xff\xfe", "invalid", "UTF-8"),
        ("edge-assistant/door/ask", b"   ", "invalid", "empty"),
        ("edge-assistant/door/ask", b"x" * 20_000, "too_large", "not read"),
        ("edge-assistant/watches/set", b'{"action": "destroy"}', "invalid", "add, change, remove, list"),
        ("edge-assistant/watches/set", b'{"name": "x"}', "invalid", "unknown action"),
    ],
)
def test_hostile_commands_get_a_clear_refusal_and_reach_nothing(topic, payload, code, words):
    fake, _, _, commands = handler()
    body = result(commands.handle(topic, payload))
    assert body["ok"] is False and body["code"] == code and words in body["error"], body
    assert len(body["error"]) < 400  # nothing of a hostile payload or topic is echoed at length
    assert fake.asked == [] and fake.watched == []


def test_a_retained_command_is_never_run_it_would_run_again_at_every_connect():
    fake, _, _, commands = handler()
    body = result(commands.handle("edge-assistant/door/ask", b"What?", retained=True))
    assert body["code"] == "retained" and fake.asked == []


def test_watch_commands_go_to_the_assistant_with_their_id_in_the_result():
    fake, _, _, commands = handler()
    reply = commands.handle("edge-assistant/watches/set", b'{"action": "remove", "name": "parcel", "id": 7}')
    assert reply.topic == "edge-assistant/watches/result"
    assert result(reply) == {"action": "remove", "ok": True, "name": "parcel", "id": "7"}
    assert fake.watched == [{"action": "remove", "name": "parcel"}]  # the id stays with the result


def test_other_topics_are_not_commands():
    _, _, _, commands = handler()
    assert commands.handle("edge-assistant/door/answer", b"{}") is None
    assert commands.handle("edge-assistant/door/ask/more", b"x") is None
    assert commands.handle("elsewhere/door/ask", b"x") is None


def test_a_flood_is_refused_past_the_burst_then_dropped_unanswered_and_counted():
    fake, clock, errors, commands = handler(command_burst=3, command_rate_s=1.0)
    replies = [commands.handle("edge-assistant/door/ask", b"What?") for _ in range(10)]
    assert [result(r)["ok"] for r in replies[:3]] == [True] * 3 and len(fake.asked) == 3
    assert [result(r)["code"] for r in replies[3:6]] == ["rate"] * 3  # refused, as many as the burst
    assert replies[6:] == [None] * 4 and commands.dropped_total == 4  # then dropped, unanswered
    assert len(errors) == 1 and "flood" in errors[0]  # reported once
    clock.now += 1.0  # one command a second refills
    after = result(commands.handle("edge-assistant/door/ask", b"What now?"))
    assert after["ok"] is True and after["dropped"] == 4 and fake.asked[-1][0] == "What now?"


def test_a_busy_assistant_is_a_refusal_and_the_next_question_goes_through():
    fake, _, _, commands = handler()
    fake.busy = True
    assert result(commands.handle("edge-assistant/door/ask", b"What?"))["code"] == "busy"
    fake.busy = False
    assert result(commands.handle("edge-assistant/door/ask", b"What?"))["ok"] is True


def test_the_slot_refuses_until_the_assistant_is_bound_and_after_it_is_unbound():
    slot, fake = CommandsSlot(), FakeCommands()
    with pytest.raises(CommandError) as refused:
        slot.ask("What?", "door", "mqtt-1")
    assert refused.value.code == NOT_READY
    slot.bind(fake)
    assert slot.ask("What?", "door", "mqtt-1") == ["door"]
    slot.unbind()
    with pytest.raises(CommandError):
        slot.watch({"action": "list"})


def test_the_text_entity_publishes_questions_to_the_streams_ask_topic():
    topic, payload = ask_text_config(config(), "door")
    assert topic == "homeassistant/text/edge-assistant/door_ask/config"
    assert payload["command_topic"] == "edge-assistant/door/ask"
    assert payload["max"] == 255 and "state_topic" not in payload  # optimistic: the answer has its own sensor
    assert payload["availability_topic"] == "edge-assistant/available"


# -- the sink against a real broker ---------------------------------------------------------------------------


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[MosquittoBroker]:
    with MosquittoBroker(tmp_path) as running:
        yield running


def publisher(port: int) -> paho.Client:
    client = paho.Client(CallbackAPIVersion.VERSION2)
    client.connect("127.0.0.1", port)
    client.loop_start()
    return client


def subscribed(sink: MqttSink, broker: MosquittoBroker, watcher: Watcher) -> None:
    """Waits until the sink took its subscriptions (it answers a probe)."""
    probe = publisher(broker.port)
    try:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            since = len(watcher.messages)
            probe.publish("edge-assistant/ask", b'{"probe": 1}', qos=1).wait_for_publish(WAIT_S)
            try:
                watcher.wait_topic("edge-assistant/ask/result", since=since, timeout=0.5)
                return
            except AssertionError:
                continue
        raise AssertionError("the sink never subscribed to its command topics")
    finally:
        probe.disconnect()
        probe.loop_stop()


def test_the_sink_announces_the_text_entity_and_answers_commands_over_the_broker(broker):
    watcher = Watcher(broker.port)
    assert watcher.subscribed.wait(WAIT_S)
    fake = FakeCommands()
    client = publisher(broker.port)
    # left retained on the broker (by mistake or on purpose): it would run again at every connect
    client.publish("edge-assistant/door/ask", "A retained question", qos=1, retain=True).wait_for_publish(WAIT_S)
    sink = MqttSink(MqttConfig(broker.url, commands=True), streams=["door"], commands=fake)
    sink.start()
    try:
        refused = watcher.wait_for(lambda m: m.topic == "edge-assistant/ask/result" and m.json()["ok"] is False, "r")
        assert refused.json()["code"] == "retained"
        text = watcher.wait_topic("homeassistant/text/edge-assistant/door_ask/config")
        assert text.json()["command_topic"] == "edge-assistant/door/ask"
        subscribed(sink, broker, watcher)
        since = len(watcher.messages)
        client.publish("edge-assistant/door/ask", "Is the door open?", qos=1)
        body = watcher.wait_topic("edge-assistant/ask/result", since=since).json()
        assert body["ok"] is True and fake.asked[-1][:2] == ("Is the door open?", "door")
        since = len(watcher.messages)
        client.publish("edge-assistant/watches/set", b"{oops", qos=1)
        assert watcher.wait_topic("edge-assistant/watches/result", since=since).json()["code"] == "invalid"
        assert [q for q, _, _ in fake.asked] == ["Is the door open?"]
    finally:
        client.publish("edge-assistant/door/ask", b"", qos=1, retain=True)  # clears the retained one
        client.disconnect()
        client.loop_stop()
        sink.close(timeout=2.0)
        watcher.close()


def test_without_commands_nothing_is_subscribed_and_a_stale_text_entity_is_removed(broker):
    watcher = Watcher(broker.port)
    assert watcher.subscribed.wait(WAIT_S)
    fake = FakeCommands()
    sink = MqttSink(MqttConfig(broker.url), streams=["door"], commands=fake)  # commands off
    sink.start()
    client = publisher(broker.port)
    try:
        removed = watcher.wait_topic("homeassistant/text/edge-assistant/door_ask/config", b"")
        assert removed.payload == b""  # an empty retained config deletes the entity in Home Assistant
        watcher.wait_topic("edge-assistant/available", b"online")
        client.publish("edge-assistant/door/ask", "Anyone?", qos=1).wait_for_publish(WAIT_S)
        client.publish("edge-assistant/ask", b'{"question": "Anyone?"}', qos=1).wait_for_publish(WAIT_S)
        time.sleep(1.0)
        assert fake.asked == [] and not any(m.topic.endswith("/result") for m in watcher.messages)
    finally:
        client.disconnect()
        client.loop_stop()
        sink.close(timeout=2.0)
        watcher.close()


def test_commands_asked_for_where_the_run_takes_none_are_reported_once():
    errors: list[str] = []
    sink = MqttSink(config(), streams=["door"], on_error=errors.append, commands=None)
    assert sink.commands is None and len(errors) == 1 and "--mqtt-commands" in errors[0]


def test_a_huge_command_never_reaches_the_sink_and_the_next_one_is_answered(broker):
    """Audit T4: paho reads a packet whole before any check, so the sink connects with MQTT 5 and a Maximum Packet
    Size (4 x command_max_bytes + 1 KiB): the broker drops a 4 MB command instead of sending it. A command just
    over command_max_bytes still arrives and gets its `too_large` refusal; the next one is answered."""
    watcher = Watcher(broker.port)
    assert watcher.subscribed.wait(WAIT_S)
    fake = FakeCommands()
    config = MqttConfig(broker.url, commands=True)
    assert max_packet_bytes(config) == 4 * 16_384 + 1024
    sink = MqttSink(config, streams=["door"], commands=fake)
    sink.start()
    client = publisher(broker.port)
    try:
        subscribed(sink, broker, watcher)
        since = len(watcher.messages)
        client.publish("edge-assistant/door/ask", b"x" * 4_000_000, qos=1).wait_for_publish(WAIT_S)
        client.publish("edge-assistant/door/ask", b"y" * 20_000, qos=1).wait_for_publish(WAIT_S)
        client.publish("edge-assistant/door/ask", "Is the door open?", qos=1).wait_for_publish(WAIT_S)
        watcher.wait_for(lambda m: m.topic == "edge-assistant/ask/result" and m.json()["ok"], "the answer", since)
        results = [m.json() for m in watcher.messages[since:] if m.topic == "edge-assistant/ask/result"]
        assert [r.get("code") for r in results] == ["too_large", None]  # the 4 MB one: nothing, not even a refusal
        assert "20000 bytes" in results[0]["error"]
        assert [q for q, _, _ in fake.asked] == ["Is the door open?"]
    finally:
        client.disconnect()
        client.loop_stop()
        sink.close(timeout=2.0)
        watcher.close()
