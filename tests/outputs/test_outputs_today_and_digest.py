"""Issue 49 through the outputs: each watch's day so far as two Home Assistant sensors, the recap over an MQTT
command, and the daily digest (--digest-at) through ntfy and a webhook. Real parts: a timeline written by the
store (SQLite and PostgreSQL), Debian's mosquitto on 127.0.0.1 with a real subscriber and publisher, a local
webhook receiver. The wall clock is the test's own (a fixed day), so "today", midnight and 21:00 come when the test
says; no whole program is started (the digest's wiring is `start_publisher`, as a run calls it)."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from datetime import datetime

import pytest

from app.cli import parse_args
from app.config import AppConfig
from app.startup import start_publisher
from bus import EventBus, WatchEvent, WatchLifecycle
from outputs import MqttConfig, MqttSink, NtfyConfig, NtfySink, WebhookConfig, WebhookSink
from outputs.digest import DigestConfig, DigestSink, digest_period, next_digest
from outputs.recaps import Digest
from outputs.timeline_reads import local_midnight, next_midnight
from tests.outputs.test_outputs_mqtt import closing, started_broker, wait_until, watcher  # noqa: F401
from tests.outputs.test_outputs_mqtt_commands import FakeCommands, publisher, subscribed
from tests.outputs.test_outputs_mqtt_entities import no_parcel_left, settled
from tests.support.event_helpers import make_event
from tests.support.webhook_receiver import receivers, start  # noqa: F401
from timeline import TimelineConfig
from timeline.period import DAY_S
from timeline.store import Row, TimelineStore

NOW = datetime(2026, 12, 2, 12, 0).timestamp()  # local noon of a fixed day
MIDNIGHT = local_midnight(NOW)
TODAY = "edge-assistant/door/parcel/today"
COUNT_CONFIG = "homeassistant/sensor/edge-assistant/door_parcel_today_count/config"
ON_CONFIG = "homeassistant/sensor/edge-assistant/door_parcel_today_on/config"


def row(state: str, t_wall: float, alert_id: str, duration: float | None = None, name: str = "parcel") -> Row:
    text = f"{name} began" if state == "begin" else f"{name} ended after {duration or 0:.0f} s"
    return Row(kind="alert", t_wall=t_wall, stream="door", start_s=0.0, end_s=0.0, question=f"Is there a {name}?",
               text=text, who="watch", alert=name, alert_id=alert_id, state=state, duration_s=duration)  # fmt: skip


ROWS = [
    row("begin", MIDNIGHT - 3600, "y1"),  # yesterday: not today's
    row("end", MIDNIGHT - 3500, "y1", 100.0),
    row("begin", MIDNIGHT - 60, "x1"),  # across midnight: 60 of its 120 s are today's, its begin is not
    row("end", MIDNIGHT + 60, "x1", 120.0),
    row("begin", MIDNIGHT + 3600, "t1"),
    row("end", MIDNIGHT + 3700, "t1", 100.0),
    row("begin", MIDNIGHT + 7200, "t2"),
    row("end", MIDNIGHT + 7230, "t2", 30.0),
    row("begin", MIDNIGHT + 7300, "c1", name="car"),  # another watch: not the parcel's
]


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def write(timeline: TimelineConfig, rows: list[Row]) -> None:
    store = TimelineStore(timeline)
    store.write(rows, now=max(r.t_wall for r in rows))
    store.db.close()


@pytest.fixture
def timeline(timeline_location) -> TimelineConfig:
    """The rows above in a real timeline: SQLite, and PostgreSQL (tests/support/timeline_backends.py)."""
    config = TimelineConfig(timeline_location, days=7.0)
    write(config, ROWS)
    return config


def alert_event(state: str, alert_id: str, t_wall: float):
    return make_event("alert", stream="door", alert="parcel", state=state, id=alert_id, p_yes=0.9, stream_time=5.0,
                      t_wall=t_wall)  # fmt: skip


def today(w, since: int = 0, **expected) -> dict:
    """The latest today payload once it says `expected`."""
    found = w.wait_for(
        lambda m: m.topic == TODAY and m.payload and all(m.json()[k] == v for k, v in expected.items()),
        f"today {expected}",
        since=since,
    )
    return found.json()


def test_midnight_and_the_digest_time_are_pure_functions_of_now():
    assert local_midnight(NOW) == datetime(2026, 12, 2).timestamp()
    assert next_midnight(NOW) == datetime(2026, 12, 3).timestamp() == next_midnight(MIDNIGHT)
    assert next_digest(NOW, (21, 0)) == datetime(2026, 12, 2, 21, 0).timestamp()
    assert next_digest(datetime(2026, 12, 2, 21, 0).timestamp(), (21, 0)) == datetime(2026, 12, 3, 21).timestamp()
    assert next_digest(NOW, (9, 30)) == datetime(2026, 12, 3, 9, 30).timestamp()
    first = digest_period(None, NOW, keep_days=7.0)
    assert (first.since, first.until) == (NOW - DAY_S, NOW)
    assert digest_period(None, NOW, keep_days=0.5).since == NOW - DAY_S / 2  # never further back than kept
    assert digest_period(NOW - 600, NOW, keep_days=7.0).since == NOW - 600
    with pytest.raises(ValueError, match="HH:MM"):
        DigestConfig("25:00")
    with pytest.raises(ValueError, match="HH:MM"):
        DigestConfig("9pm")


def test_the_sensors_of_a_watchs_day_follow_the_timeline_and_go_with_the_watch(tmp_path, closing, timeline):  # noqa: F811
    broker = started_broker(tmp_path, closing)
    clock = Clock(NOW)
    sink = MqttSink(MqttConfig(broker.url), alerts={"door": ["parcel"]}, timeline=timeline, clock=clock)
    sink.timeline.reads.recheck_s = 0.05  # the idle thread looks at the test's clock often (midnight below)
    closing.append(sink)
    live = watcher(broker.port, closing)
    sink.start()
    count = live.wait_topic(COUNT_CONFIG).json()
    assert count["state_topic"] == TODAY and count["value_template"] == "{{ value_json.count }}"
    assert count["default_entity_id"] == "sensor.edge_assistant_door_parcel_today_count"
    on = live.wait_topic(ON_CONFIG).json()
    assert (on["device_class"], on["unit_of_measurement"], on["state_topic"]) == ("duration", "s", TODAY)
    assert on["value_template"] == "{{ value_json.on_s }}"
    assert today(live) == {"count": 2, "on_s": 60.0 + 100.0 + 30.0, "since": MIDNIGHT}  # t1, t2 begun; x1's share
    assert watcher(broker.port, closing).wait_topic(TODAY).json()["count"] == 2  # retained: a later subscriber too

    # a new alert begins: the sensors read the timeline again once the writer wrote its row
    write(timeline, [row("begin", MIDNIGHT + 10_000, "t3")])
    clock.now = MIDNIGHT + 10_060
    since = len(live.messages)
    sink.handle(alert_event("begin", "t3", MIDNIGHT + 10_000))
    assert today(live, since, count=3)["on_s"] == pytest.approx(190.0 + 60.0)  # t3 open for 60 s so far
    # its end reaches the sink before the writer wrote it: the read waits for the row (without it, t3 would
    # still be open at the clock's time: 200 s on, not 90)
    clock.now = MIDNIGHT + 10_200
    since = len(live.messages)
    sink.handle(alert_event("end", "t3", MIDNIGHT + 10_090))
    time.sleep(0.3)
    write(timeline, [row("end", MIDNIGHT + 10_090, "t3", 90.0)])
    assert today(live, since, count=3)["on_s"] == pytest.approx(190.0 + 90.0)

    # local midnight: a new day, nothing begun yet
    since = len(live.messages)
    clock.now = next_midnight(NOW) + 30
    assert today(live, since, count=0) == {"count": 0, "on_s": 0.0, "since": next_midnight(NOW)}

    # the watch ends for good: its sensors are removed with its other entities
    sink.handle(WatchEvent(stream="door", alert="parcel", change=WatchLifecycle.ENDED))
    live.wait_topic(COUNT_CONFIG, b"")
    live.wait_topic(ON_CONFIG, b"")
    live.wait_topic(TODAY, b"")
    wait_until(lambda: no_parcel_left(broker.port, closing), "no retained message of the watch left")


def test_with_the_timeline_off_there_are_no_sensors_of_the_day(tmp_path, closing):  # noqa: F811
    broker = started_broker(tmp_path, closing)
    sink = MqttSink(MqttConfig(broker.url), alerts={"door": ["parcel"]})
    closing.append(sink)
    live = watcher(broker.port, closing)
    sink.start()
    live.wait_topic("homeassistant/binary_sensor/edge-assistant/door_parcel/config")
    sink.handle(alert_event("begin", "t9", NOW))
    live.wait_topic("edge-assistant/door/events")
    assert not [m.topic for m in settled(watcher(broker.port, closing)).messages if "today" in m.topic]


def recap_result(w, request_id: str, since: int = 0) -> dict:
    return w.wait_for(
        lambda m: m.topic == "edge-assistant/recap/result" and m.json().get("id") == request_id,
        f"recap {request_id}",
        since=since,
    ).json()


def test_the_recap_command_is_answered_with_the_recap_or_the_periods_refusal(tmp_path, closing, timeline):  # noqa: F811
    broker = started_broker(tmp_path, closing)
    delivered: list[Digest] = []  # what the publisher would hand to ntfy and the webhooks
    sink = MqttSink(MqttConfig(broker.url, commands=True), streams=["door"], commands=FakeCommands(),
                    timeline=timeline, clock=Clock(NOW), deliver=delivered.append)  # fmt: skip
    closing.append(sink)
    live = watcher(broker.port, closing)
    sink.start()
    subscribed(sink, broker, live)
    client = publisher(broker.port)
    try:
        body = {"since": datetime.fromtimestamp(MIDNIGHT + 3000).isoformat(), "watch": "parcel", "id": "r1"}
        client.publish("edge-assistant/recap", json.dumps(body), qos=1)
        done = recap_result(live, "r1")
        assert done["ok"] is True and done["action"] == "recap"
        assert [line["watch"] for line in done["recap"]["lines"]] == ["parcel", "parcel"]  # t1, t2
        assert "parcel: on for 1 min 40 s" in done["text"] and "parcel: on for 30 s" in done["text"]
        wait_until(lambda: len(delivered) == 1, "the recap handed to the other outputs")
        assert delivered[0].text == done["text"] and delivered[0].scheduled is False
        sink.handle(delivered[0])  # back through the publisher: not published again on <prefix>/digest
        body = {"since": "12h", "notify": False, "id": "quiet"}
        client.publish("edge-assistant/recap", json.dumps(body), qos=1)
        assert recap_result(live, "quiet")["ok"] is True
        # "since I left": plain text, the time the automation sends (epoch seconds here)
        client.publish("edge-assistant/recap", str(MIDNIGHT + 5000), qos=1)
        plain = live.wait_for(
            lambda m: m.topic == "edge-assistant/recap/result" and "id" not in m.json(), "the plain recap"
        ).json()
        assert plain["ok"] is True and [line["stream"] for line in plain["recap"]["lines"]] == ["door", "door"]
        assert "parcel: on for 30 s" in plain["text"] and "1 min 40 s" not in plain["text"]  # t2, car's c1
        wait_until(lambda: len(delivered) == 2, "the plain recap handed on too (the quiet one was not)")
        assert delivered[1].text == plain["text"]
        assert "edge-assistant/digest" not in [m.topic for m in live.messages]
        client.publish("edge-assistant/recap", json.dumps({"since": "2h", "until": "3h", "id": "bad"}), qos=1)
        bad = recap_result(live, "bad")
        assert (bad["ok"], bad["code"]) == (False, "invalid") and "ends before it starts" in bad["error"]
        client.publish("edge-assistant/recap", json.dumps({"since": "last tuesday", "id": "odd"}), qos=1)
        assert "an age (90s, 30m, 2h, 1d" in recap_result(live, "odd")["error"]
        client.publish("edge-assistant/recap", json.dumps({"since": "30d", "id": "far"}), qos=1)
        assert "--timeline-days" in recap_result(live, "far")["error"]
        # the scheduled digest is published on its own topic
        schedule = DigestSink(DigestConfig("21:00"), timeline, None, clock=Clock(NOW))
        scheduled = schedule.tick(datetime(2026, 12, 2, 21).timestamp())
        assert scheduled is not None
        sink.handle(scheduled)
        digest = live.wait_topic("edge-assistant/digest").json()
        assert digest["type"] == "digest" and digest["text"] == scheduled.text and digest["scheduled"] is True
    finally:
        client.disconnect()
        client.loop_stop()


def test_with_the_timeline_off_the_recap_command_says_what_to_turn_on(tmp_path, closing):  # noqa: F811
    broker = started_broker(tmp_path, closing)
    sink = MqttSink(MqttConfig(broker.url, commands=True), streams=["door"], commands=FakeCommands())
    closing.append(sink)
    live = watcher(broker.port, closing)
    sink.start()
    subscribed(sink, broker, live)
    client = publisher(broker.port)
    try:
        client.publish("edge-assistant/recap", json.dumps({"since": "8h", "id": "off"}), qos=1)
        off = recap_result(live, "off")
        assert (off["ok"], off["code"]) == (False, "not_available") and "--timeline PATH" in off["error"]
    finally:
        client.disconnect()
        client.loop_stop()


def test_the_scheduled_digest_reaches_a_webhook_at_its_time(timeline, receivers):  # noqa: F811
    receiver = start(receivers)
    webhook = WebhookSink(WebhookConfig(receiver.url))
    webhook.start()
    try:
        clock = Clock(NOW)
        digest = DigestSink(DigestConfig("21:00"), timeline, webhook.handle, clock=clock)
        assert digest.tick(NOW) is None and digest.tick(datetime(2026, 12, 2, 20, 59).timestamp()) is None
        at_nine = datetime(2026, 12, 2, 21, 0).timestamp()
        sent = digest.tick(at_nine)
        assert isinstance(sent, Digest) and (sent.recap.since, sent.recap.until) == (at_nine - DAY_S, at_nine)
        ((headers, body),) = receiver.wait_for(1)
        posted = json.loads(body)
        assert posted["type"] == "digest" and posted["scheduled"] is True and posted["text"] == sent.text
        watches = [line["watch"] for line in posted["lines"]]
        assert watches == ["parcel"] * 4 + ["car"]  # since yesterday 21:00: y1, x1, t1, t2 and the open c1
        assert digest.tick(at_nine + 60) is None  # once a day
        # the next day's digest covers what came since this one
        write(timeline, [row("begin", at_nine + 600, "n1"), row("end", at_nine + 660, "n1", 60.0)])
        tomorrow = next_digest(at_nine, (21, 0))
        later = digest.tick(tomorrow)
        assert later is not None and later.recap.since == at_nine
        second = json.loads(receiver.wait_for(2)[1][1])
        assert [line["text"] for line in second["lines"] if line["watch"] == "parcel"] == ["parcel: on for 1 min 0 s"]
    finally:
        webhook.close(timeout=2.0)


def test_ntfy_sends_the_digests_short_lines(timeline, receivers):  # noqa: F811
    receiver = start(receivers)
    sink = NtfySink(NtfyConfig(receiver.url))
    schedule = DigestSink(DigestConfig("21:00"), timeline, None, clock=Clock(NOW))
    digest = schedule.tick(datetime(2026, 12, 2, 21).timestamp())
    assert digest is not None
    sink.send(digest)
    ((headers, body),) = receiver.wait_for(1)
    assert body.decode() == digest.text and digest.text.startswith("From 2026-12-01 21:00 to 2026-12-02 21:00: 5 alert")
    assert headers["Title"] == "digest" and "door: parcel: on for 1 min 40 s" in digest.text


def test_the_digest_setting_reaches_the_webhooks_through_the_publisher(tmp_path, timeline, receivers):  # noqa: F811
    """`start_publisher` as a run calls it: the digest's recap is delivered to the publisher, which feeds the
    webhook; with the timeline off the digest says once what to turn on."""
    receiver = start(receivers)
    flags = ["--video", "a.mp4", "--digest-at", "21:00", "--webhook", receiver.url]
    config = replace(AppConfig.from_args(parse_args(flags)), timeline=timeline)  # SQLite or PostgreSQL
    assert config.outputs["digest"] == [DigestConfig("21:00")]
    bus = EventBus()
    publisher = start_publisher(config, {}, bus)
    assert publisher is not None
    try:
        digest = next(sink for sink in publisher.sinks if isinstance(sink, DigestSink))
        sent = digest.tick(digest.due)
        assert sent is not None
        ((_, body),) = receiver.wait_for(1)
        assert json.loads(body)["text"] == sent.text
    finally:
        publisher.close(timeout=2.0)
    errors: list[str] = []
    bus.subscribe(lambda event: errors.append(getattr(event, "message", "")))
    off = start_publisher(AppConfig.from_args(parse_args([*flags, "--timeline", ""])), {}, bus)
    assert off is not None
    off.close(timeout=2.0)
    assert [m for m in errors if "--timeline PATH" in m and "digest at 21:00" in m]


def test_a_timeline_that_cannot_be_read_is_a_recap_refusal_not_silence(tmp_path, closing):  # noqa: F811
    broker = started_broker(tmp_path, closing)
    missing = TimelineConfig(tmp_path / "never-written.sqlite")
    sink = MqttSink(MqttConfig(broker.url, commands=True), streams=["door"], commands=FakeCommands(),
                    timeline=missing, clock=Clock(NOW))  # fmt: skip
    closing.append(sink)
    live = watcher(broker.port, closing)
    sink.start()
    subscribed(sink, broker, live)
    client = publisher(broker.port)
    try:
        client.publish("edge-assistant/recap", json.dumps({"since": "8h", "id": "gone"}), qos=1)
        gone = recap_result(live, "gone")
        assert (gone["ok"], gone["code"]) == (False, "not_available") and "cannot read the timeline" in gone["error"]
    finally:
        client.disconnect()
        client.loop_stop()
