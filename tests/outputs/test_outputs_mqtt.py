"""The MQTT sink against a real broker (Debian's mosquitto on 127.0.0.1, tests/support/mqtt_broker.py) and a real
paho subscriber: Home Assistant discovery, alert states, snapshots, events and answers; the last will when
the process is killed; a broker down at start and restarted mid-run; credentials that never leak."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from bus import EventBus
from bus.supervisor import RestartPolicy
from outputs import MqttConfig, MqttSink, OutputPublisher
from outputs.mqtt_config import parse_mqtt_url
from tests.support.event_helpers import make_event
from tests.support.mqtt_broker import MosquittoBroker
from tests.support.mqtt_watcher import Watcher

ROOT = Path(__file__).resolve().parents[2]
WAIT_S = 10.0
JPEG = b"\xff\xd8\xff\xe0fake-jpeg\xff\xd9"
PASSWORD = "pw-Zq8!never-in-logs"


@pytest.fixture
def closing() -> Iterator[list]:
    """Things to close after the test whatever happens (watchers, publishers, brokers, in reverse)."""
    items: list = []
    try:
        yield items
    finally:
        for item in reversed(items):
            if isinstance(item, OutputPublisher):
                item.close(timeout=2.0)
            elif isinstance(item, MqttSink):
                item.close(timeout=2.0)
            elif isinstance(item, MosquittoBroker):
                item.stop()
            else:
                item.close()


def started_broker(tmp_path: Path, closing: list, **kwargs) -> MosquittoBroker:
    broker = MosquittoBroker(tmp_path, **kwargs)
    closing.append(broker)
    broker.start()
    return broker


def watcher(port: int, closing: list, session: str | None = None) -> Watcher:
    w = Watcher(port, session)
    closing.append(w)
    return w


def alert(state: str, name: str = "person", **fields) -> dict:
    values = {"id": f"door-{name}-3", "p_yes": 0.93, "stream_time": 44.0, **fields}
    return make_event("alert", stream="door", alert=name, state=state, **values)


def answer(round_: int, stream: str = "door") -> dict:
    return make_event(
        "answer", stream=stream, round=round_, stream_time=12.0, question="Who is there?", answer="A courier.",
        auto=False, batch=1,
    )  # fmt: skip


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_urls_ports_and_errors():
    assert parse_mqtt_url("mqtt://broker.lan") == ("broker.lan", 1883, False)
    assert parse_mqtt_url("mqtts://broker.lan") == ("broker.lan", 8883, True)
    assert parse_mqtt_url("mqtt://127.0.0.1:1884/") == ("127.0.0.1", 1884, False)
    for bad in ("http://broker", "broker:1883", "mqtt://", "mqtt://h:notaport", "mqtt://h/topic", "mqtt://h:70000"):
        with pytest.raises(ValueError, match=r"mqtt://HOST\[:PORT\]"):
            MqttConfig(bad)
    with pytest.raises(ValueError, match="must not hold credentials") as info:
        MqttConfig(f"mqtt://user:{PASSWORD}@h")
    assert PASSWORD not in str(info.value)
    for bad_prefix in ("", "a/#", "/x", "x/"):
        with pytest.raises(ValueError, match="prefix"):
            MqttConfig("mqtt://h", prefix=bad_prefix)


def test_credentials_come_from_the_environment_or_a_file_and_stay_out_of_reprs(tmp_path):
    env = {"EDGE_ASSISTANT_MQTT_USERNAME": "cam", "EDGE_ASSISTANT_MQTT_PASSWORD": PASSWORD}
    config = MqttConfig.from_environment("mqtt://h", env=env)
    assert (config.username, config.password) == ("cam", PASSWORD)
    assert PASSWORD not in repr(config) and PASSWORD not in str(config)
    password_file = tmp_path / "mqtt-password"
    password_file.write_text("from-file\n")
    password_file.chmod(0o600)
    assert MqttConfig.from_environment("mqtt://h", password_file, env=env).password == "from-file"
    assert MqttConfig.from_environment("mqtt://h", env={}).password is None


def test_discovery_states_snapshots_events_and_answers(tmp_path, closing):
    broker = started_broker(tmp_path, closing)
    live = watcher(broker.port, closing)
    bus = EventBus()
    config = MqttConfig(broker.url, min_on_s=0.0)  # an OFF at once (the hold: test_outputs_mqtt_entities.py)
    sink = MqttSink(config, streams=["door", "yard"], alerts={"door": ["person"], "yard": ["car"]})
    publisher = OutputPublisher([sink])
    closing.append(publisher)
    bus.subscribe(publisher)
    publisher.start()

    live.wait_topic("edge-assistant/available", b"online")
    person = live.wait_topic("homeassistant/binary_sensor/edge-assistant/door_person/config").json()
    assert person["state_topic"] == "edge-assistant/door/person/state"
    assert (person["payload_on"], person["payload_off"], person["device_class"]) == ("ON", "OFF", "occupancy")
    assert person["availability_topic"] == "edge-assistant/available"
    assert person["unique_id"] == "edge-assistant_door_person"
    assert person["device"]["identifiers"] == ["edge-assistant"]
    car = live.wait_topic("homeassistant/binary_sensor/edge-assistant/yard_car/config").json()
    assert car["state_topic"] == "edge-assistant/yard/car/state" and car["device"] == person["device"]
    image = live.wait_topic("homeassistant/image/edge-assistant/door_person_snapshot/config").json()
    assert image["image_topic"] == "edge-assistant/door/person/snapshot"
    for stream in ("door", "yard"):
        sensor = live.wait_topic(f"homeassistant/sensor/edge-assistant/{stream}_answer/config").json()
        assert sensor["state_topic"] == f"edge-assistant/{stream}/answer"
        assert sensor["value_template"] == "{{ value_json.answer[:255] }}"
        assert sensor["availability_topic"] == "edge-assistant/available"
    live.wait_topic("edge-assistant/door/person/state", b"OFF")  # every announced alert starts OFF

    mark = len(live.messages)
    bus.publish(alert("begin", snapshot=JPEG))
    bus.publish(answer(3))
    bus.publish(alert("end", duration_s=12.0, stream_time=56.0))
    live.wait_topic("edge-assistant/door/person/state", b"ON", since=mark)
    assert live.wait_topic("edge-assistant/door/person/snapshot", since=mark).payload == JPEG
    begin, end = (
        live.wait_for(lambda m, s=s: m.topic == "edge-assistant/door/events" and m.json()["state"] == s, s, mark).json()
        for s in ("begin", "end")
    )
    assert begin == {
        "type": "alert", "stream": "door", "id": "door-person-3", "alert": "person", "state": "begin", "p_yes": 0.93,
        "stream_time": 44.0, "t_wall": begin["t_wall"],
    }  # fmt: skip
    assert end["duration_s"] == 12.0 and end["stream_time"] == 56.0
    got = live.wait_topic("edge-assistant/door/answer", since=mark).json()
    assert got == {
        "type": "answer", "stream": "door", "round": 3, "stream_time": 12.0, "question": "Who is there?",
        "answer": "A courier.", "auto": False, "t_wall": got["t_wall"],
    }  # fmt: skip
    live.wait_topic("edge-assistant/door/person/state", b"OFF", since=mark)

    late = watcher(broker.port, closing)  # a new subscriber gets the retained state of now
    assert late.wait_topic("edge-assistant/door/person/state").payload == b"OFF"
    assert late.wait_topic("edge-assistant/door/person/snapshot").payload == JPEG
    assert late.wait_topic("edge-assistant/available").retain
    bus.publish(alert("begin", name="package"))  # an alert nobody announced is announced when first seen
    late.wait_topic("homeassistant/binary_sensor/edge-assistant/door_package/config")
    late.wait_topic("edge-assistant/door/package/state", b"ON")

    mark = len(late.messages)
    bus.publish(make_event("status", stream=None, message="assistant stopped"))
    late.wait_topic("edge-assistant/available", b"offline", since=mark)
    bus.publish(make_event("status", stream=None, message="assistant ready"))
    late.wait_topic("edge-assistant/available", b"online", since=mark)

    bus.unsubscribe(publisher)
    publisher.close(timeout=5.0)
    assert watcher(broker.port, closing).wait_topic("edge-assistant/available").payload == b"offline"


def test_discovery_can_be_turned_off(tmp_path, closing):
    broker = started_broker(tmp_path, closing)
    live = watcher(broker.port, closing)
    sink = MqttSink(MqttConfig(broker.url, prefix="nodisc", discovery=False), ["door"], {"door": ["person"]})
    closing.append(sink)
    sink.start()
    live.wait_topic("nodisc/door/person/state", b"OFF")  # published after the discovery configs would be
    assert not any(m.topic.startswith("homeassistant/") for m in live.messages)


SCRIPT = """
import sys, threading
from outputs import MqttConfig, MqttSink
sink = MqttSink(MqttConfig(sys.argv[1], prefix="killed", discovery=False), ["door"], {"door": ["person"]})
sink.start()
threading.Event().wait()
"""


def test_a_killed_process_leaves_offline_as_its_last_will(tmp_path, closing):
    broker = started_broker(tmp_path, closing)
    live = watcher(broker.port, closing)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, broker.url], cwd=ROOT, env=env)
    try:
        online = live.wait_topic("killed/available", b"online")
        mark = live.messages.index(online) + 1
        proc.send_signal(signal.SIGKILL)
        proc.wait(WAIT_S)
        live.wait_topic("killed/available", b"offline", since=mark)
    finally:
        proc.kill()
        proc.wait()
    assert watcher(broker.port, closing).wait_topic("killed/available").payload == b"offline"  # retained


def test_broker_restart_reconnects_and_restores_retained_state(tmp_path, closing):
    broker = started_broker(tmp_path, closing, persistence=True)
    live = watcher(broker.port, closing, session="restart-watcher")
    errors: list[str] = []
    config = MqttConfig(broker.url, reconnect_min_s=0.1, reconnect_max_s=0.3, min_on_s=0.0)
    sink = MqttSink(config, ["door"], {"door": ["person"]}, on_error=errors.append)
    bus, publisher = EventBus(), OutputPublisher([sink])
    closing.append(publisher)
    bus.subscribe(publisher)
    publisher.start()
    bus.publish(alert("begin", snapshot=JPEG))
    live.wait_topic("edge-assistant/door/person/state", b"ON")

    broker.stop()  # persisted: the retained state ON (stale once the alert ends below)
    wait_until(lambda: not sink.connected, "the sink to notice the broker is gone")
    mark = len(live.messages)
    bus.publish(alert("end", duration_s=12.0))
    bus.publish(answer(7))
    wait_until(lambda: sink._backlog, "the events to wait in the backlog")  # handled while the broker is down
    broker.start()

    live.wait_for(lambda m: m.topic == "edge-assistant/available" and m.payload == b"online" and not m.retain,
                  "a live online after the restart", mark)  # fmt: skip
    is_end = lambda m: m.topic == "edge-assistant/door/events" and m.json()["state"] == "end"  # noqa: E731
    assert (
        live.wait_for(is_end, "the alert's end, published while the broker was down", mark).json()["duration_s"] == 12.0
    )
    assert live.wait_topic("edge-assistant/door/answer", since=mark).json()["round"] == 7
    fresh = watcher(broker.port, closing)
    assert fresh.wait_topic("edge-assistant/door/person/state").payload == b"OFF"
    assert fresh.wait_topic("edge-assistant/available").payload == b"online"
    fresh.wait_topic("homeassistant/binary_sensor/edge-assistant/door_person/config")
    assert len(errors) == 1 and "connection lost" in errors[0], errors  # one report per outage


def test_a_broker_down_at_start_is_retried_and_the_backlog_drops_the_oldest(tmp_path, closing):
    broker = started_broker(tmp_path, closing, persistence=True)
    live = watcher(broker.port, closing, session="backlog-watcher")
    assert live.subscribed.wait(WAIT_S)  # the broker keeps this subscription through the stop
    broker.stop()
    errors: list[str] = []
    config = MqttConfig(broker.url, backlog=3, reconnect_min_s=0.1, reconnect_max_s=0.3)
    sink = MqttSink(config, ["door"], on_error=errors.append)
    closing.append(sink)
    sink.start()
    wait_until(lambda: errors, "the unreachable broker to be reported")
    assert "cannot reach the broker" in errors[0]
    for i in range(1, 6):
        sink.handle(answer(i))
    assert sink.dropped == 2 and len(errors) == 1  # the drops are reported when the outage ends
    broker.start()
    live.wait_topic("edge-assistant/door/answer", since=0)
    wait_until(lambda: len([m for m in live.messages if m.topic == "edge-assistant/door/answer"]) >= 3, "3 answers")
    rounds = [m.json()["round"] for m in live.messages if m.topic == "edge-assistant/door/answer"]
    assert rounds == [3, 4, 5]
    wait_until(lambda: len(errors) == 2, "the outage's summary")
    assert "2 messages dropped during the outage" in errors[1]


def test_drops_while_the_broker_is_down_are_one_report_at_the_start_and_one_count_at_the_end(tmp_path, closing):
    broker = started_broker(tmp_path, closing)
    errors: list[str] = []
    config = MqttConfig(broker.url, backlog=5, reconnect_min_s=0.1, reconnect_max_s=0.3)
    sink = MqttSink(config, ["door"], on_error=errors.append)
    closing.append(sink)
    sink.start()
    wait_until(lambda: sink.connected, "the first connect")
    for outage, messages in ((1, 50), (2, 12)):
        broker.stop()
        started = 2 * outage - 1
        wait_until(lambda n=started: len(errors) == n and not sink.connected, "the outage's start to be reported")
        assert "connection lost" in errors[-1], errors
        for i in range(messages):
            sink.handle(answer(i))
        assert len(errors) == started, errors  # no report per dropped message
        broker.start()
        wait_until(lambda n=started + 1: len(errors) == n, "the outage's summary")
        assert f"{messages - 5} messages dropped during the outage" in errors[-1], errors
    assert sink.dropped == 45 + 7


def test_a_crash_in_the_network_thread_is_reported_once_and_the_loop_restarts(tmp_path, closing, monkeypatch):
    broker = started_broker(tmp_path, closing, persistence=True)
    live = watcher(broker.port, closing, session="crash-watcher")
    assert live.subscribed.wait(WAIT_S)
    errors: list[str] = []
    config = MqttConfig(broker.url, reconnect_min_s=0.1, reconnect_max_s=0.3)
    sink = MqttSink(config, ["door"], on_error=errors.append, restarts=RestartPolicy(backoff_s=0.05))
    closing.append(sink)
    original = sink._report_outage
    calls: list[str] = []

    def crash_once(message: str) -> None:  # raised in paho's thread by the on_disconnect callback
        calls.append(message)
        if len(calls) == 1:
            raise RuntimeError(f"injected {PASSWORD}")
        original(message)

    monkeypatch.setattr(sink, "_report_outage", crash_once)
    sink.start()
    wait_until(lambda: sink.connected, "the first connect")
    broker.stop()
    wait_until(lambda: errors, "the crash to be reported")
    sink.handle(answer(9))  # waits in the backlog
    broker.start()
    assert live.wait_topic("edge-assistant/door/answer").json()["round"] == 9  # paho's loop runs again
    crashes = [e for e in errors if "worker crashed (RuntimeError)" in e]
    assert len(crashes) == 1 and all(PASSWORD not in e for e in errors), errors


def test_mqtts_with_a_private_ca(tmp_path, closing):
    if shutil.which("openssl") is None:
        missing = "openssl not found (makes the test certificate); apt-get install openssl"
        pytest.fail(missing) if os.environ.get("EDGE_ASSISTANT_REQUIRE_TOOLS") == "1" else pytest.skip(missing)
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    broker = started_broker(tmp_path, closing, tls=(cert, key))
    assert broker.url.startswith("mqtts://")
    live = paho.Client(CallbackAPIVersion.VERSION2)
    live.tls_set(ca_certs=str(cert))
    got = threading.Event()
    live.on_connect = lambda c, u, f, rc, p: c.subscribe("tls/available")
    live.on_message = lambda c, u, m: m.payload == b"online" and got.set()
    live.connect("127.0.0.1", broker.port)
    live.loop_start()
    try:
        sink = MqttSink(MqttConfig(broker.url, prefix="tls", discovery=False, ca_file=cert))
        closing.append(sink)
        sink.start()
        assert got.wait(WAIT_S)
    finally:
        live.disconnect()
        live.loop_stop()


def test_credentials_reach_the_broker_and_never_a_log(tmp_path, closing, caplog):
    caplog.set_level(logging.DEBUG)
    broker = started_broker(tmp_path, closing, users={"cam": PASSWORD, "watcher": "w"})
    live = Watcher.__new__(Watcher)
    live.messages, live.cond = [], threading.Condition()
    live.client = paho.Client(CallbackAPIVersion.VERSION2)
    live.client.username_pw_set("watcher", "w")
    live.client.on_connect = lambda c, u, f, rc, p: c.subscribe("#", qos=1)
    live.client.on_message = live._on_message
    live.client.connect("127.0.0.1", broker.port)
    live.client.loop_start()
    closing.append(live)
    password_file = tmp_path / "mqtt-password"
    password_file.write_text(PASSWORD + "\n")
    password_file.chmod(0o600)
    errors: list[str] = []
    env = {"EDGE_ASSISTANT_MQTT_USERNAME": "cam"}
    good = MqttSink(MqttConfig.from_environment(broker.url, password_file, env=env, prefix="auth"), ["door"])
    closing.append(good)
    good.start()
    live.wait_topic("auth/available", b"online")
    bad_env = {"EDGE_ASSISTANT_MQTT_USERNAME": "cam", "EDGE_ASSISTANT_MQTT_PASSWORD": "wrong"}
    bad = MqttSink(MqttConfig.from_environment(broker.url, env=bad_env, prefix="bad"), on_error=errors.append)
    closing.append(bad)
    bad.start()
    wait_until(lambda: errors, "the refused connection to be reported")
    assert "refused" in errors[0] and not bad.connected
    assert all(PASSWORD not in r.getMessage() and PASSWORD not in str(r.args) for r in caplog.records)
    assert all(PASSWORD not in e for e in errors)
