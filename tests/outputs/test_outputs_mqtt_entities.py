"""Home Assistant's entities as Home Assistant reads them today (2025.10+): the entity id each discovery config asks
for (`default_entity_id`, never the deprecated `object_id`), a device per prefix, and entities made and removed with
their watch; the answer retained. Against a real broker (Debian's mosquitto on 127.0.0.1) and a real subscriber."""

from __future__ import annotations

import time

import pytest

import outputs.discovery as topics
from bus import Status, StatusKind, WatchEvent, WatchLifecycle
from outputs import MqttConfig, MqttSink
from tests.outputs.test_outputs_mqtt import (  # noqa: F401 (closing: the fixture)
    WAIT_S,
    alert,
    answer,
    closing,
    started_broker,
    wait_until,
    watcher,
)
from tests.support.mqtt_watcher import Watcher

CONFIGS = (
    (topics.alert_sensor_config, ("door", "parcel"), "binary_sensor", "door_parcel"),
    (topics.snapshot_image_config, ("door", "parcel"), "image", "door_parcel_snapshot"),
    (topics.answer_sensor_config, ("door",), "sensor", "door_answer"),
    (topics.ask_text_config, ("door",), "text", "door_ask"),
)
CONFIGS_OF_A_WATCH = (topics.alert_sensor_config, topics.snapshot_image_config)
HOLD_S = 1.0  # an ON held at least this long (MqttConfig.min_on_s; 5 s by default)


@pytest.mark.parametrize(("prefix", "slug", "device"), [("edge-assistant", "edge_assistant", "Edge assistant"),
                                                        ("garage", "garage", "Garage")])  # fmt: skip
def test_every_config_asks_for_its_full_entity_id_on_a_device_named_after_the_prefix(prefix, slug, device):
    config = MqttConfig("mqtt://h", prefix=prefix)
    for make, args, domain, key in CONFIGS:
        topic, payload = make(config, *args)
        assert topic == f"homeassistant/{domain}/{prefix}/{key}/config"
        assert payload["default_entity_id"] == f"{domain}.{slug}_{key}"  # the documented ids with the default prefix
        assert "object_id" not in payload  # deprecated in 2025.10, ignored from 2026.4
        assert payload["unique_id"] == f"{prefix}_{key}"  # unchanged: Home Assistant keeps the same entities
        assert payload["device"]["identifiers"] == [prefix] and payload["device"]["name"] == device
    assert topics.ask_text_config(MqttConfig("mqtt://h", prefix="Home/Cams-1"), "door")[1]["default_entity_id"] == (
        "text.home_cams_1_door_ask"
    )
    named = MqttConfig("mqtt://h", prefix="garage", device_name="Side door")
    assert topics.answer_sensor_config(named, "door")[1]["device"]["name"] == "Side door"


def watch_event(change: str, name: str = "parcel", reason: str = "") -> WatchEvent:
    return WatchEvent(stream="door", alert=name, change=WatchLifecycle(change), reason=reason)


def settled(w: Watcher) -> Watcher:
    """`w` once the broker handed it every retained message: they come before its own message sent after them."""
    assert w.subscribed.wait(WAIT_S)
    w.client.publish("test/settled", b"1", qos=1)
    w.wait_topic("test/settled")
    return w


def parcel_topics(w: Watcher) -> list[str]:
    return [m.topic for m in w.messages if "parcel" in m.topic and m.payload]


def no_parcel_left(port: int, closing: list) -> bool:  # noqa: F811
    """Whether a new subscriber gets no retained message of the watch."""
    return not parcel_topics(settled(watcher(port, closing)))


def test_the_answer_is_retained(tmp_path, closing):  # noqa: F811
    broker = started_broker(tmp_path, closing)
    sink = MqttSink(MqttConfig(broker.url), streams=["door"])
    closing.append(sink)
    sink.start()
    live = watcher(broker.port, closing)
    live.wait_topic("edge-assistant/available", b"online")
    sink.handle(answer(3))
    live.wait_topic("edge-assistant/door/answer")
    late = settled(watcher(broker.port, closing))  # Home Assistant started after the answer still shows it
    got = late.wait_topic("edge-assistant/door/answer", timeout=0.1)
    assert got.retain and got.json()["round"] == 3


def test_a_watch_set_at_run_time_is_announced_at_once_and_removed_when_it_ends_for_good(tmp_path, closing):  # noqa: F811
    broker = started_broker(tmp_path, closing)
    live = watcher(broker.port, closing)
    config = MqttConfig(broker.url, reconnect_min_s=0.1, reconnect_max_s=0.2, min_on_s=HOLD_S)
    sink = MqttSink(config, streams=["door"])
    closing.append(sink)
    sink.start()
    live.wait_topic("edge-assistant/available", b"online")
    sensor, image = (make(sink.config, "door", "parcel")[0] for make in CONFIGS_OF_A_WATCH)
    state, snapshot = "edge-assistant/door/parcel/state", "edge-assistant/door/parcel/snapshot"

    mark = len(live.messages)
    sink.handle(watch_event("set"))  # its entities come when it is set, before any alert
    assert live.wait_topic(sensor, since=mark).json()["state_topic"] == state
    assert live.wait_topic(image, since=mark).json()["image_topic"] == snapshot
    live.wait_topic(state, b"OFF", since=mark)
    sink.handle(alert("begin", name="parcel", snapshot=b"\xff\xd8jpeg\xff\xd9"))
    began = time.monotonic()
    live.wait_topic(state, b"ON", since=mark)
    sink.handle(alert("end", name="parcel", reason="one-shot"))  # a one-shot's end follows its begin at once

    mark = len(live.messages)
    sink.handle(watch_event("ended", reason="one-shot"))
    live.wait_topic(state, b"OFF", since=mark)  # held ON for min_on_s first: Home Assistant sees it on
    assert time.monotonic() - began >= HOLD_S
    for topic in (sensor, image, state, snapshot):
        live.wait_topic(topic, b"", since=mark)  # an empty retained payload removes the entity (and the state)
    offs = [i for i, m in enumerate(live.messages) if m.topic == state and m.payload == b"OFF"]
    assert offs[-1] < min(i for i, m in enumerate(live.messages) if m.topic == sensor and m.payload == b"")
    wait_until(lambda: no_parcel_left(broker.port, closing), "nothing of the watch left on the broker")

    broker.restart()  # forgets every retained message: the sink publishes its own again, not the watch's
    wait_until(lambda: not sink.connected, "the sink to notice")
    wait_until(lambda: sink.connected, "the sink to reconnect")
    again = settled(watcher(broker.port, closing))
    again.wait_topic("homeassistant/sensor/edge-assistant/door_answer/config", timeout=1.0)
    assert not parcel_topics(again)


def test_a_watch_that_ends_while_the_broker_is_down_is_removed_at_the_reconnect(tmp_path, closing):  # noqa: F811
    broker = started_broker(tmp_path, closing, persistence=True)
    sink = MqttSink(MqttConfig(broker.url, reconnect_min_s=0.1, reconnect_max_s=0.2), streams=["door"])
    closing.append(sink)
    sink.start()
    live = watcher(broker.port, closing)
    for name in ("parcel", "gate"):
        sink.handle(watch_event("set", name))
        live.wait_topic(f"homeassistant/binary_sensor/edge-assistant/door_{name}/config")
        live.wait_topic(f"edge-assistant/door/{name}/state", b"OFF")
    broker.stop()
    wait_until(lambda: not sink.connected, "the sink to notice")
    sink.handle(watch_event("ended", reason="expired"))
    sink.handle(watch_event("ended", "gate", reason="removed"))
    sink.handle(watch_event("set", "gate"))  # set again before the reconnect: it stays
    broker.start()  # persistence: the broker still holds the watches' configs and states of before
    wait_until(lambda: sink.connected, "the sink to reconnect")
    wait_until(lambda: no_parcel_left(broker.port, closing), "the watch's retained messages removed")
    late = settled(watcher(broker.port, closing))
    assert late.wait_topic("homeassistant/binary_sensor/edge-assistant/door_gate/config", timeout=0.1).json()
    assert late.wait_topic("edge-assistant/door/gate/state", timeout=0.1).payload == b"OFF"


def test_an_on_held_at_close_is_ended_before_offline(tmp_path, closing):  # noqa: F811
    """A hold never keeps an ON past the assistant's stop: at close what waits is published, then `offline`."""
    broker = started_broker(tmp_path, closing)
    live = watcher(broker.port, closing)
    sink = MqttSink(MqttConfig(broker.url, min_on_s=600.0), streams=["door"])
    sink.start()
    live.wait_topic("edge-assistant/available", b"online")
    state = "edge-assistant/door/parcel/state"
    sink.handle(watch_event("set"))
    sink.handle(alert("begin", name="parcel"))
    live.wait_topic(state, b"ON")
    mark = len(live.messages)
    sink.handle(alert("end", name="parcel"))
    sink.close(timeout=WAIT_S)
    live.wait_topic("edge-assistant/available", b"offline", since=mark)
    order = [(m.topic, m.payload) for m in live.messages[mark:]]
    assert order.index((state, b"OFF")) < order.index(("edge-assistant/available", b"offline"))


def test_a_removed_stream_takes_its_entities_and_its_watches_entities_with_it(tmp_path, closing):  # noqa: F811
    """Removing a stream while running (the API, the page, MQTT): its answer sensor, its text entity to ask with,
    its retained answer and its watches' entities are removed (empty retained payloads); the other stream's stay.
    A new subscriber (Home Assistant after a restart) gets nothing of it back."""
    broker = started_broker(tmp_path, closing)
    live = watcher(broker.port, closing)
    sink = MqttSink(MqttConfig(broker.url, min_on_s=0.0), streams=["door", "yard"])
    closing.append(sink)
    sink.start()
    live.wait_topic("edge-assistant/available", b"online")
    sink.handle(watch_event("set"))
    sink.handle(answer(1))
    live.wait_topic("edge-assistant/door/answer")
    sink.handle(answer(2, stream="yard"))
    live.wait_topic("edge-assistant/yard/answer")
    mark = len(live.messages)
    sink.handle(Status(stream="door", kind=StatusKind.STREAM_REMOVED, message="stream removed"))
    for topic in ("homeassistant/sensor/edge-assistant/door_answer/config",
                  "homeassistant/text/edge-assistant/door_ask/config", "edge-assistant/door/answer",
                  "homeassistant/binary_sensor/edge-assistant/door_parcel/config", "edge-assistant/door/parcel/state"):
        live.wait_topic(topic, b"", since=mark)  # fmt: skip

    def door_topics(w: Watcher) -> list[str]:
        return [m.topic for m in w.messages if ("door" in m.topic) and m.payload]

    wait_until(lambda: not door_topics(settled(watcher(broker.port, closing))), "nothing of the door left")
    yard = settled(watcher(broker.port, closing))
    assert yard.wait_topic("edge-assistant/yard/answer", timeout=1.0).json()["round"] == 2
    yard.wait_topic("homeassistant/sensor/edge-assistant/yard_answer/config", timeout=1.0)
