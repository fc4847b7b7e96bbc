"""`python -m app --alert ... --mqtt ... --webhook ...` end to end: a real broker (Debian's mosquitto on
127.0.0.1) sees Home Assistant discovery, availability, alert states, events, snapshots and answers; a real
HTTP receiver gets the same as signed JSON; secrets appear nowhere; bad output URLs exit 2."""

import base64
import hashlib
import hmac
import json
import os
import signal
import subprocess

import pytest

from app.__main__ import main
from tests.support.app_helpers import REPO, app_command, of_type, read_log, video
from tests.support.in_process_main import run_app_here
from tests.support.mqtt_broker import MosquittoBroker
from tests.support.mqtt_watcher import Watcher
from tests.support.webhook_receiver import Receiver

SECRET = "webhook-secret-never-printed"
ALERTS = '[alerts.person]\nquestion = "Is there a person?"\nthreshold = 0.0\nevery = 4\non_after = 1\n'


@pytest.fixture
def outputs(tmp_path):
    receiver = Receiver()
    receiver.thread.start()
    broker = MosquittoBroker(tmp_path)
    broker.start()
    watcher = Watcher(broker.port)
    assert watcher.subscribed.wait(10)
    try:
        yield broker, watcher, receiver
    finally:
        watcher.close()
        broker.stop()
        receiver.close()


def _run(tmp_path, broker, receiver, *extra):
    (tmp_path / "alerts.toml").write_text(ALERTS)
    (tmp_path / "secret").write_text(SECRET + "\n")
    (tmp_path / "secret").chmod(0o600)
    log = tmp_path / "events.jsonl"
    done = run_app_here(
        "--stream", f"door={video(16)}", "--model", "tiny", "--no-realtime", "--every", "8", "--budget", "256",
        "--window", "16", "--max-new-tokens", "8", "--quiet", "--config", str(tmp_path / "alerts.toml"),
        "--mqtt", broker.url, "--webhook", receiver.url, "--webhook-secret-file", str(tmp_path / "secret"),
        "--log-jsonl", str(log), *extra,
    )  # fmt: skip
    return done, log


def test_alerts_and_answers_reach_the_broker_and_the_webhook(outputs, tmp_path):
    broker, watcher, receiver = outputs
    done, log = _run(tmp_path, broker, receiver)
    assert done.returncode == 0, done.stderr[-2000:]
    events = read_log(log)
    # threshold 0: on at the first check, and still on when the video ends: ended as the assistant stops
    assert [(a.state, a.reason) for a in of_type(events, "alert")] == [("begin", ""), ("end", "assistant stopped")]
    # Home Assistant discovery: the watch as a binary sensor wired to the availability topic
    config = watcher.wait_topic("homeassistant/binary_sensor/edge-assistant/door_person/config").json()
    assert config["state_topic"] == "edge-assistant/door/person/state"
    assert config["availability_topic"] == "edge-assistant/available"
    assert watcher.wait_topic("homeassistant/sensor/edge-assistant/door_answer/config").json()["state_topic"] == (
        "edge-assistant/door/answer"
    )
    watcher.wait_topic("edge-assistant/available", b"online")
    watcher.wait_topic("edge-assistant/door/person/state", b"ON")
    begin = watcher.wait_topic("edge-assistant/door/events").json()
    assert begin["state"] == "begin" and begin["id"] == of_type(events, "alert")[0].id
    assert watcher.wait_topic("edge-assistant/door/person/snapshot").payload[:2] == b"\xff\xd8"  # a JPEG
    answers = [m.json() for m in watcher.messages if m.topic == "edge-assistant/door/answer"]
    watcher.wait_for(lambda m: m.topic == "edge-assistant/door/answer" and m.json()["stream_time"] == 16.0, "answers")
    answers = [m.json() for m in watcher.messages if m.topic == "edge-assistant/door/answer"]
    assert [a["stream_time"] for a in answers] == [8.0, 16.0]
    watcher.wait_for(lambda m: m.topic == "edge-assistant/available" and m.payload == b"offline", "offline at exit")
    # the alert's end before the assistant went offline: Home Assistant's binary sensor is off
    states = [(i, m.payload) for i, m in enumerate(watcher.messages) if m.topic == "edge-assistant/door/person/state"]
    assert [payload for _, payload in states[-2:]] == [b"ON", b"OFF"], states
    offline = [i for i, m in enumerate(watcher.messages) if m.topic == "edge-assistant/available"][-1]
    assert states[-1][0] < offline
    ends = [m.json() for m in watcher.messages if m.topic == "edge-assistant/door/events"]
    assert [(e["state"], e.get("reason")) for e in ends] == [("begin", None), ("end", "assistant stopped")]
    # the webhook: the same JSON, signed
    posts = receiver.wait_for(4)
    bodies = [json.loads(body) for _, body in posts]
    assert sorted(b["type"] for b in bodies) == ["alert", "alert", "answer", "answer"]
    for headers, body in posts:
        expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        assert headers["X-Edge-Assistant-Signature"] == expected
    alert = next(b for b in bodies if b["type"] == "alert" and b["state"] == "begin")
    assert base64.b64decode(alert["snapshot_jpeg_base64"])[:2] == b"\xff\xd8"
    # the secret is nowhere but in its file
    assert SECRET not in done.stdout + done.stderr + log.read_text()


def test_a_killed_app_leaves_offline_through_the_last_will(outputs, tmp_path):
    broker, watcher, receiver = outputs
    (tmp_path / "alerts.toml").write_text(ALERTS)
    app = subprocess.Popen(
        app_command(
            "--stream", f"door={video(16)}", "--model", "tiny", "--loop", "--no-realtime", "--every", "0", "--quiet",
            "--config", str(tmp_path / "alerts.toml"), "--mqtt", broker.url,
        ),
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ}, start_new_session=True,
    )  # fmt: skip
    try:
        watcher.wait_topic("edge-assistant/door/person/state", b"ON")  # the app's start included
        since = len(watcher.messages)
        os.killpg(app.pid, signal.SIGKILL)
        app.wait(10)
        watcher.wait_topic("edge-assistant/available", b"offline", since=since)
    finally:
        if app.poll() is None:
            os.killpg(app.pid, signal.SIGKILL)
            app.wait()


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--mqtt", "http://127.0.0.1:1883", "mqtt://"),
        ("--mqtt", "mqtt://user:pass@127.0.0.1", "credentials"),
        ("--webhook", "ftp://127.0.0.1/hook", "http"),
    ],
)
def test_malformed_output_urls_exit_2(capsys, flag, value, message):
    with pytest.raises(SystemExit) as exited:
        main(["--video", str(video(8)), "--model", "tiny", "--timeline", "", flag, value])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and message in err, err[-1500:]
    assert "pass@" not in err


@pytest.mark.parametrize("url", ["http://cam:hunter2-never-printed@127.0.0.1:9/hook", "file:///etc/passwd"])
def test_a_webhook_url_with_credentials_or_another_scheme_exits_2(capsys, url):
    with pytest.raises(SystemExit) as exited:
        main(["--video", str(video(8)), "--model", "tiny", "--timeline", "", "--webhook", url])
    err = capsys.readouterr().err
    assert exited.value.code == 2, err[-1500:]
    assert "hunter2" not in err and "Traceback" not in err
    assert ("credentials" in err and "--webhook-secret-file" in err) or "http://HOST" in err
