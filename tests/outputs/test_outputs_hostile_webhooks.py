"""Webhooks against hostile receivers on 127.0.0.1 (tests/support/webhook_receiver.py): an endless body, a status
line that never ends, a trickle, a redirect elsewhere, garbage. Each costs at most a bounded read and one
deadline, is reported (never with the URL's path or a secret), and the next message still goes out."""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
from pathlib import Path

import pytest

from bus.supervisor import RestartPolicy
from outputs import WebhookConfig, WebhookSink
from outputs.http_post import RESPONSE_LIMIT, PostError, final_status, post, request_bytes
from tests.support.event_helpers import make_event
from tests.support.mqtt_broker import free_port
from tests.support.webhook_receiver import (
    Receiver,
    endless_body,
    endless_status_line,
    garbage,
    redirect,
    start,
    trickle,
)

WAIT_S = 10.0
SECRET = "hmac-key-never-in-a-message"
FAST_RESTART = RestartPolicy(backoff_s=0.05)


def answer(round_: int) -> dict:
    return make_event("answer", stream="door", round=round_, stream_time=1.0, question="Who?", answer="A courier.")


def rounds(receiver: Receiver, n: int) -> list[int]:
    return [json.loads(body)["round"] for _, body in receiver.wait_for(n)]


def run_sink(config: WebhookConfig, events: list[dict], until: Receiver, n: int) -> tuple[WebhookSink, list[str]]:
    """A started sink fed `events`, closed once `until` got `n` requests; returns it and its reports."""
    errors: list[str] = []
    sink = WebhookSink(config, on_error=errors.append, restarts=FAST_RESTART)
    sink.start()
    try:
        for event in events:
            sink.handle(event)
        until.wait_for(n)
    finally:
        sink.close(timeout=WAIT_S)
    return sink, errors


def test_an_endless_body_is_not_read_only_the_status_line(receivers):
    receiver = start(receivers, answers=[endless_body])
    result = post(receiver.url, b"{}", {}, timeout_s=WAIT_S)
    assert result.status == 200 and result.bytes_read < RESPONSE_LIMIT
    assert receiver.hung_up.wait(WAIT_S)  # the client closed the connection while the body was still coming


def test_an_endless_status_line_is_read_up_to_the_limit(receivers):
    receiver = start(receivers, answers=[endless_status_line])
    with pytest.raises(PostError, match="64 KiB") as info:
        post(receiver.url, b"{}", {}, timeout_s=WAIT_S)
    assert info.value.bytes_read == RESPONSE_LIMIT and info.value.retry
    assert receiver.hung_up.wait(WAIT_S)


def test_a_webhook_answering_with_an_endless_body_goes_on_with_the_next_message(receivers):
    receiver = start(receivers, answers=[endless_body])
    sink, errors = run_sink(WebhookConfig(receiver.url, secret=SECRET), [answer(1), answer(2)], receiver, 2)
    assert rounds(receiver, 2) == [1, 2]
    assert sink.delivered == 2 and sink.failed == 0 and errors == []
    assert receiver.hung_up.wait(WAIT_S)


def test_a_trickling_receiver_hits_the_deadline_is_retried_reported_and_the_next_message_goes_out(receivers):
    receiver = start(receivers, answers=[trickle(0.2), trickle(0.2)])  # both attempts of the first message
    config = WebhookConfig(receiver.url, timeout_s=1.0, retries=1, backoff_s=0.05)
    sink, errors = run_sink(config, [answer(1), answer(2)], receiver, 3)
    assert rounds(receiver, 3) == [1, 1, 2]  # the first message twice (it was retried), then the second
    assert sink.failed == 1 and sink.delivered == 1
    assert len(errors) == 1 and "deadline" in errors[0] and "token-in-path" not in errors[0], errors


def test_a_redirect_is_not_followed_nor_retried_and_is_reported(receivers):
    elsewhere = start(receivers)
    receiver = start(receivers, answers=[redirect(elsewhere.url)])
    sink, errors = run_sink(
        WebhookConfig(receiver.url, secret=SECRET, backoff_s=0.05), [answer(1), answer(2)], receiver, 2
    )
    assert rounds(receiver, 2) == [1, 2]  # not retried: the second request is the next message
    assert elsewhere.requests == []  # the signed request went nowhere else
    assert sink.failed == 1 and sink.delivered == 1
    assert len(errors) == 1 and "HTTP 302" in errors[0] and "redirect" in errors[0], errors


def test_garbage_instead_of_http_is_retried_and_reported_and_the_worker_goes_on(receivers):
    receiver = start(receivers, answers=[garbage, garbage])
    config = WebhookConfig(receiver.url, retries=1, backoff_s=0.05)
    sink, errors = run_sink(config, [answer(1), answer(2)], receiver, 3)
    assert rounds(receiver, 3) == [1, 1, 2]
    assert sink.failed == 1 and sink.delivered == 1
    assert len(errors) == 1 and "not HTTP" in errors[0], errors


def test_final_status_skips_interim_answers_and_refuses_what_is_not_http():
    assert final_status(b"HTTP/1.1 204 No Content\r\n") == 204
    assert final_status(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nX: y") == 201
    assert final_status(b"HTTP/1.1 103 Early Hints\r\nLink: x\r\n") is None  # the final status is still to come
    assert final_status(b"HTTP/1.1 2") is None
    for bad in (b"HELLO THERE\r\n", b"SSH-2.0-OpenSSH_9.6 and more", b"HTTP/1.1 abc\r\n"):
        with pytest.raises(ValueError, match="not HTTP"):
            final_status(bad)


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (openssl)."""
    if shutil.which("openssl") is None:
        missing = "openssl not found (makes the test certificate); apt-get install openssl"
        pytest.fail(missing) if os.environ.get("EDGE_ASSISTANT_REQUIRE_TOOLS") == "1" else pytest.skip(missing)
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    return cert, key


def test_https_posts_verify_the_certificate_and_keep_the_deadline(receivers, certificate):
    receiver = start(receivers, tls=certificate, answers=[trickle(0.2)])
    assert receiver.url.startswith("https://")
    trusted = ssl.create_default_context(cafile=str(certificate[0]))
    with pytest.raises(PostError, match="deadline"):  # the trickle, over TLS
        post(receiver.url, b"{}", {}, timeout_s=1.0, ssl_context=trusted)
    assert post(receiver.url, b'{"n": 2}', {}, timeout_s=WAIT_S, ssl_context=trusted).status == 200
    assert receiver.wait_for(2)[1][1] == b'{"n": 2}'
    with pytest.raises(PostError, match="certificate refused") as info:  # the system's CAs do not know it
        post(receiver.url, b"{}", {}, timeout_s=WAIT_S)
    assert not info.value.retry


def test_a_receiver_that_keeps_failing_is_reported_once_then_counted(receivers):
    receiver = start(receivers, statuses=(400, 400, 400, 400))  # 4xx: given up at once, not retried
    config = WebhookConfig(receiver.url, retries=0)
    sink, errors = run_sink(config, [answer(i) for i in range(5)] + [answer(5)], receiver, 6)
    assert sink.failed == 4 and sink.delivered == 2
    assert len(errors) == 2 and "gave up on a request: HTTP 400" in errors[0], errors
    assert "delivering again; 3 more requests given up since the first" in errors[1], errors
    down = WebhookConfig(f"http://127.0.0.1:{free_port()}/hook", retries=0)  # nobody listens there
    sink, errors = run_sink(down, [answer(i) for i in range(4)], receiver, 0)
    assert sink.failed == 4 and len(errors) == 2 and "3 more requests given up since the first" in errors[1], errors


def test_the_request_goes_to_the_path_and_query_and_its_host_header_has_no_userinfo():
    head, _, body = request_bytes("http://u:p@[::1]:8080/hook/t?k=1#frag", b"{}", {"X-A": "b"}).partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[:4] == ["POST /hook/t?k=1 HTTP/1.1", "Host: [::1]:8080", "Content-Length: 2", "Connection: close"]
    assert lines[4:] == ["X-A: b"] and body == b"{}"
