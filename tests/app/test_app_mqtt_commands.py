"""`python -m app --mqtt URL --mqtt-commands` for real: the tiny model on a looping video, Debian's mosquitto on
127.0.0.1, a real paho subscriber and publisher. Home Assistant discovers a text entity and an answer sensor per
stream; a question published to the text entity's command topic is answered on the stream's answer topic; a watch
added by a command has its entities at once, alerts (ON on its state topic), and removing it ends the alert (OFF)
and removes its entities; bad commands get error results and the run keeps answering."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator

import paho.mqtt.client as paho
import pytest
from paho.mqtt.enums import CallbackAPIVersion

from tests.support.app_helpers import REPO, app_command, video
from tests.support.mqtt_broker import MosquittoBroker
from tests.support.mqtt_watcher import Watcher

START_S = 240.0
ANSWER_S = 120.0
P = "edge-assistant"


class Run:
    """The app, the broker, a subscriber to everything and a publisher of commands."""

    def __init__(self, tmp_path) -> None:
        self.broker = MosquittoBroker(tmp_path)
        self.broker.start()
        self.watcher = Watcher(self.broker.port)
        assert self.watcher.subscribed.wait(10)
        self.client = paho.Client(CallbackAPIVersion.VERSION2)
        self.client.connect("127.0.0.1", self.broker.port)
        self.client.loop_start()
        self.output = tmp_path / "app.txt"
        args = app_command(
            "--stream", f"door={video(60)}", "--loop", "--model", "tiny", "--budget", "256", "--window", "16",
            "--max-new-tokens", "6", "--every", "30", "--quiet", "--max-question-chars", "100",
            "--mqtt", self.broker.url, "--mqtt-commands", "--timeline", str(tmp_path / "data" / "timeline.sqlite"),
        )  # fmt: skip
        with open(self.output, "w") as out:
            self.process = subprocess.Popen(
                args, cwd=REPO, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )  # fmt: skip

    def publish(self, topic: str, payload: str | bytes | dict) -> None:
        data = json.dumps(payload) if isinstance(payload, dict) else payload
        self.client.publish(topic, data, qos=1).wait_for_publish(10)

    def command(self, topic: str, payload, result_topic: str, timeout: float = 20.0) -> dict:
        """Publishes a command and returns its result (matched by its id when it has one)."""
        since = len(self.watcher.messages)
        self.publish(topic, payload)
        wanted = payload.get("id") if isinstance(payload, dict) else None

        def match(m) -> bool:
            return m.topic == result_topic and (wanted is None or m.json().get("id") == wanted)

        return self.watcher.wait_for(match, f"a result on {result_topic}", since, timeout).json()

    def wait_ready(self) -> None:
        """Until the run takes commands: a list command answered ok (before, it is refused as not ready)."""
        deadline = time.monotonic() + START_S
        probe = 0
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.output.read_text()[-3000:]
            probe += 1
            try:
                result = self.command(f"{P}/watches/set", {"action": "list", "id": f"probe-{probe}"},
                                      f"{P}/watches/result", timeout=2.0)  # fmt: skip
            except AssertionError:
                continue
            if result["ok"]:
                return
            assert result["code"] == "not_ready", result
            time.sleep(0.5)
        raise AssertionError("the run never took commands: " + self.output.read_text()[-3000:])

    def answer(self, request: str, since: int = 0) -> dict:
        def match(m) -> bool:
            return m.topic == f"{P}/door/answer" and m.json().get("request") == request

        return self.watcher.wait_for(match, f"the answer to {request}", since, ANSWER_S).json()

    def close(self) -> int | None:
        code = None
        if self.process.poll() is None:
            self.process.terminate()
            code = self.process.wait(60)
        self.client.disconnect()
        self.client.loop_stop()
        self.watcher.close()
        self.broker.stop()
        return code


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Iterator[Run]:
    running = Run(tmp_path_factory.mktemp("mqtt-commands"))
    try:
        running.wait_ready()
        yield running
    finally:
        running.close()


def test_home_assistant_discovers_a_text_entity_to_ask_and_a_sensor_with_the_last_answer(run):
    text = run.watcher.wait_topic("homeassistant/text/edge-assistant/door_ask/config").json()
    assert text["command_topic"] == f"{P}/door/ask" and text["availability_topic"] == f"{P}/available"
    assert text["max"] == 255
    sensor = run.watcher.wait_topic("homeassistant/sensor/edge-assistant/door_answer/config").json()
    assert sensor["state_topic"] == sensor["json_attributes_topic"] == f"{P}/door/answer"
    assert sensor["value_template"] == "{{ value_json.answer[:255] }}"  # Home Assistant keeps 255 characters
    assert text["device"] == sensor["device"]


def test_a_question_to_the_text_entitys_topic_is_answered_on_the_streams_answer_topic(run):
    since = len(run.watcher.messages)
    queued = run.command(f"{P}/door/ask", "What is in the picture?", f"{P}/ask/result")
    assert queued["ok"] is True and queued["streams"] == ["door"] and queued["request"].startswith("mqtt-")
    answer = run.answer(queued["request"], since)
    assert answer["question"] == "What is in the picture?" and answer["auto"] is False
    assert isinstance(answer["answer"], str) and answer["stream"] == "door"
    asked = run.command(f"{P}/ask", {"question": "And now?", "stream": "door", "id": "q7"}, f"{P}/ask/result")
    assert asked["ok"] is True and asked["request"] == "mqtt-q7" and asked["id"] == "q7"
    assert run.answer("mqtt-q7", since)["question"] == "And now?"


def test_a_watch_added_by_command_alerts_and_removing_it_ends_the_alert_and_its_entities(run):
    add = {
        "action": "add",
        "name": "person",
        "question": "Is there a person?",
        "stream": "door",
        "every_s": 2,
        "threshold": 0.0,
        "on_after": 1,
        "id": "add-1",
    }  # fmt: skip  (threshold 0: yes at the first check)
    configs = ("homeassistant/binary_sensor/edge-assistant/door_person/config",
               "homeassistant/image/edge-assistant/door_person_snapshot/config")  # fmt: skip
    since = len(run.watcher.messages)
    added = run.command(f"{P}/watches/set", add, f"{P}/watches/result")
    assert added["ok"] is True and added["action"] == "add", added
    assert added["watch"]["owner"] == "mqtt" and added["watch"]["streams"] == ["door"]
    for topic in configs:  # its entities come when it is set: OFF until its first alert
        run.watcher.wait_topic(topic, since=since)
    run.watcher.wait_topic(f"{P}/door/person/state", b"OFF", since=since)
    run.watcher.wait_topic(f"{P}/door/person/state", b"ON", since=since, timeout=ANSWER_S)
    again = run.command(f"{P}/watches/set", {**add, "id": "add-2"}, f"{P}/watches/result")
    assert again["ok"] is False and again["code"] == "conflict"
    listed = run.command(f"{P}/watches/set", {"action": "list", "id": "list-1"}, f"{P}/watches/result")
    assert [w["name"] for w in listed["watches"]] == ["person"]
    since = len(run.watcher.messages)
    removed = run.command(f"{P}/watches/set", {"action": "remove", "name": "person", "id": "rm-1"},
                          f"{P}/watches/result")  # fmt: skip
    assert removed == {"action": "remove", "ok": True, "name": "person", "id": "rm-1"}
    run.watcher.wait_topic(f"{P}/door/person/state", b"OFF", since=since, timeout=ANSWER_S)
    for topic in (*configs, f"{P}/door/person/state"):  # an empty retained payload: removed from Home Assistant
        run.watcher.wait_topic(topic, b"", since=since)
    gone = run.command(f"{P}/watches/set", {"action": "remove", "name": "person", "id": "rm-2"}, f"{P}/watches/result")
    assert gone["ok"] is False and gone["code"] == "not_found"


def test_bad_commands_get_error_results_and_the_run_keeps_answering(run):
    cases = [
        (f"{P}/watches/set", b"{not json", "invalid"),
        (f"{P}/watches/set", {"action": "explode", "id": "x1"}, "invalid"),
        (f"{P}/watches/set", {"action": "add", "question": "q?", "every_s": 0.01, "id": "x2"}, "invalid"),
        (f"{P}/door/ask", "x" * 101, "invalid"),  # over --max-question-chars
        (f"{P}/garage/ask", "Anyone?", "not_found"),
        (f"{P}/door/ask", b"y" * 20_000, "too_large"),
        (f"{P}/ask", b"\xff\xfe\xfd", "invalid"),
    ]
    for topic, payload, code in cases:
        result_topic = f"{P}/watches/result" if "watches" in topic else f"{P}/ask/result"
        result = run.command(topic, payload, result_topic)
        assert result["ok"] is False and result["code"] == code and result["error"], (topic, result)
    since = len(run.watcher.messages)
    queued = run.command(f"{P}/door/ask", "Still there?", f"{P}/ask/result")
    assert queued["ok"] is True
    assert run.answer(queued["request"], since)["question"] == "Still there?"
    assert run.process.poll() is None
