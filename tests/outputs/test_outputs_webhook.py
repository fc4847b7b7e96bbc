"""Webhooks against a real HTTP receiver on 127.0.0.1: the JSON and its HMAC signature, retries (5xx and
connection errors, not 4xx), and independence: a slow or unreachable webhook delays neither the bus's
publishing thread nor another webhook."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import socket
import threading

import pytest

from bus import EventBus
from outputs import OutputPublisher, WebhookConfig, WebhookSink
from outputs.webhook import SIGNATURE_HEADER, backoff_delay
from tests.support.event_helpers import make_event
from tests.support.webhook_receiver import start

WAIT_S = 10.0
SECRET = "s3cret-hmac-key"
JPEG = b"\xff\xd8\xff\xe0fake-jpeg\xff\xd9"


def refused_url() -> str:
    """A loopback URL nobody listens on (connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


def alert_begin() -> dict:
    return make_event(
        "alert", stream="door", id="door-person-3", alert="person", state="begin", p_yes=0.93, stream_time=44.0,
        snapshot=JPEG,
    )  # fmt: skip


def alert_end() -> dict:
    return make_event(
        "alert", stream="door", id="door-person-3", alert="person", state="end", p_yes=0.12, stream_time=56.0,
        duration_s=12.0,
    )  # fmt: skip


def answer(round_: int = 3) -> dict:
    return make_event(
        "answer", stream="door", round=round_, stream_time=12.0, question="Who is at the door?", answer="A courier.",
        auto=True, batch=1, ttft_s=0.2,
    )  # fmt: skip


def test_config_rejects_bad_urls_and_hides_the_url_path_and_secret(tmp_path):
    for bad in ("ftp://example.com/x", "example.com/hook", "http://", "http://host:99999/x"):
        with pytest.raises(ValueError, match="http"):
            WebhookConfig(bad)
    config = WebhookConfig("https://hooks.example.com:8443/api/webhook/TOKEN123", secret=SECRET)
    assert "TOKEN123" not in repr(config) and SECRET not in repr(config) and "hooks.example.com:8443" in repr(config)
    secret_file = tmp_path / "secret"
    secret_file.write_text("from-file\n")
    with pytest.raises(ValueError, match=f"other users may read it .*chmod 600 {secret_file}"):
        WebhookConfig.from_environment("http://h/x", secret_file, env={})
    secret_file.chmod(0o600)
    assert WebhookConfig.from_environment("http://h/x", secret_file, env={}).secret == "from-file"
    env = {"EDGE_ASSISTANT_WEBHOOK_SECRET": "from-env"}
    assert WebhookConfig.from_environment("http://h/x", env=env).secret == "from-env"
    assert WebhookConfig.from_environment("http://h/x", env={}).secret is None
    with pytest.raises(ValueError, match="No such file"):
        WebhookConfig.from_environment("http://h/x", tmp_path / "missing", env={})


def test_backoff_doubles_up_to_the_cap():
    config = WebhookConfig("http://h/x", backoff_s=0.5, max_backoff_s=3.0)
    assert [backoff_delay(config, i) for i in range(5)] == [0.5, 1.0, 2.0, 3.0, 3.0]


def test_payloads_and_hmac_signature(receivers):
    receiver = start(receivers)
    sink = WebhookSink(WebhookConfig(receiver.url, secret=SECRET))
    sink.start()
    try:
        for event in (alert_begin(), answer(), alert_end()):
            sink.handle(event)
        got = receiver.wait_for(3)
    finally:
        sink.close(timeout=5.0)
    for headers, body in got:
        expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
        assert headers[SIGNATURE_HEADER] == expected
        assert headers["Content-Type"] == "application/json"
    begin, ans, end = (json.loads(body) for _, body in got)
    assert base64.b64decode(begin.pop("snapshot_jpeg_base64")) == JPEG
    assert begin == {
        "type": "alert", "stream": "door", "id": "door-person-3", "alert": "person", "state": "begin", "p_yes": 0.93,
        "stream_time": 44.0, "t_wall": begin["t_wall"],
    }  # fmt: skip
    assert end["state"] == "end" and end["duration_s"] == 12.0 and "snapshot_jpeg_base64" not in end
    assert ans == {
        "type": "answer", "stream": "door", "round": 3, "stream_time": 12.0, "question": "Who is at the door?",
        "answer": "A courier.", "auto": True, "t_wall": ans["t_wall"],
    }  # fmt: skip
    assert sink.delivered == 3 and sink.failed == 0


def test_no_secret_no_signature(receivers):
    receiver = start(receivers)
    sink = WebhookSink(WebhookConfig(receiver.url))
    sink.start()
    try:
        sink.handle(answer())
        ((headers, _),) = receiver.wait_for(1)
    finally:
        sink.close(timeout=5.0)
    assert SIGNATURE_HEADER not in headers


def test_a_500_is_retried_and_the_request_arrives_once(receivers):
    receiver = start(receivers, statuses=(500,))
    errors: list[str] = []
    sink = WebhookSink(WebhookConfig(receiver.url, retries=3, backoff_s=0.05), on_error=errors.append)
    sink.start()
    try:
        sink.handle(answer())
        got = receiver.wait_for(2)
    finally:
        sink.close(timeout=5.0)
    assert len(receiver.requests) == 2 and got[0][1] == got[1][1]  # the same body twice: one 500, one 200
    assert sink.delivered == 1 and sink.failed == 0 and errors == []


def test_a_4xx_is_not_retried_and_is_reported(receivers):
    receiver = start(receivers, statuses=(400,))
    errors: list[str] = []
    sink = WebhookSink(WebhookConfig(receiver.url, retries=3, backoff_s=0.05), on_error=errors.append)
    sink.start()
    try:
        sink.handle(answer())
        receiver.wait_for(1)
    finally:
        sink.close(timeout=5.0)
    assert len(receiver.requests) == 1 and sink.failed == 1
    assert len(errors) == 1 and "HTTP 400" in errors[0] and "token-in-path" not in errors[0]


def test_connection_errors_are_retried_then_given_up_and_reported():
    errors: list[str] = []
    sink = WebhookSink(WebhookConfig(refused_url(), retries=2, backoff_s=0.01), on_error=errors.append)
    sink.start()
    sink.handle(answer())
    sink.close(timeout=5.0)
    assert sink.failed == 1 and sink.delivered == 0
    assert len(errors) == 1 and "cannot reach it" in errors[0]


def test_slow_and_unreachable_webhooks_delay_neither_the_bus_nor_another_webhook(receivers):
    gate = threading.Event()
    slow, fast = start(receivers, gate=gate), start(receivers)
    sinks = [
        WebhookSink(WebhookConfig(slow.url, timeout_s=WAIT_S)),
        WebhookSink(WebhookConfig(refused_url(), retries=50, backoff_s=0.2, max_backoff_s=0.2)),
        WebhookSink(WebhookConfig(fast.url)),
    ]
    bus = EventBus()
    publisher = OutputPublisher(sinks)
    bus.subscribe(publisher)
    publisher.start()
    try:
        bus.publish(answer(0))
        assert slow.entered.wait(WAIT_S)  # the slow receiver now holds its first request until `gate` is set
        published = threading.Event()

        def publish_more() -> None:
            for i in range(1, 6):
                bus.publish(answer(i))
            published.set()

        publisher_thread = threading.Thread(target=publish_more)
        publisher_thread.start()
        assert published.wait(WAIT_S), "bus.publish waited on a webhook"
        publisher_thread.join()
        rounds = [json.loads(body)["round"] for _, body in fast.wait_for(6)]
        assert rounds == [0, 1, 2, 3, 4, 5]
        assert not gate.is_set() and slow.requests == []  # all of that happened while the slow one was held
    finally:
        gate.set()
        bus.unsubscribe(publisher)
        publisher.close(timeout=1.5)
    assert len(slow.wait_for(6)) == 6
    assert sinks[1].delivered == 0 and all(not s.worker._thread.is_alive() for s in sinks)


def test_credentials_in_the_url_and_unsafe_characters_are_refused_without_echoing_them():
    password = "hunter2-never-echoed"
    for url in (f"http://user:{password}@127.0.0.1/hook", f"https://{password}@hooks.example.com/x"):
        with pytest.raises(ValueError, match="must not hold credentials") as info:
            WebhookConfig(url)
        assert password not in str(info.value) and "webhook-secret-file" in str(info.value)
    for bad in ("http://127.0.0.1/a b", "http://127.0.0.1/a\r\nX-Injected: 1", "http://127.0.0.1/é", "http://[::1/x"):
        with pytest.raises(ValueError, match="webhook URL") as info:
            WebhookConfig(bad)
        assert "Injected" not in str(info.value)
    for bad in ("file:///etc/passwd", "gopher://127.0.0.1/x", "javascript:alert(1)", "//127.0.0.1/hook"):
        with pytest.raises(ValueError, match=r"http://HOST\[:PORT\]"):
            WebhookConfig(bad)
