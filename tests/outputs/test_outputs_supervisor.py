"""Output workers never die silently: a crash is one report (the exception's type, never its text) and a
restart with backoff, bounded; then the next message still goes out. The webhook's thread against a real
receiver, the publisher's thread, and the restart policy itself."""

from __future__ import annotations

import json
import threading

import pytest

from bus import EventBus
from bus.supervisor import RestartPolicy, run_supervised
from outputs import OutputPublisher, WebhookConfig, WebhookSink
from tests.outputs.test_outputs_publisher import RecordingSink
from tests.support.event_helpers import make_event
from tests.support.webhook_receiver import Receiver

WAIT_S = 10.0
SECRET_TEXT = "token-hunter2"  # in the injected exception's text: must not reach a report
FAST = RestartPolicy(backoff_s=0.05)


def answer(round_: int) -> dict:
    return make_event("answer", stream="door", round=round_, stream_time=1.0, question="Who?", answer="A courier.")


def crash_once(original):
    """`original`, except that its first call raises RuntimeError (with a secret in its text)."""
    calls = []

    def wrapped(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError(f"injected crash {SECRET_TEXT}")
        return original(*args, **kwargs)

    return wrapped


def test_the_policy_backs_off_and_gives_up():
    policy = RestartPolicy(max_restarts=3, backoff_s=0.5, max_backoff_s=1.5)
    assert [policy.delay(n) for n in (1, 2, 3, 4)] == [0.5, 1.0, 1.5, None]
    with pytest.raises(ValueError, match="max_restarts"):
        RestartPolicy(max_restarts=-1)


def test_a_worker_that_keeps_crashing_is_restarted_a_bounded_number_of_times_then_stopped():
    runs, reports = [], []

    def work() -> None:
        runs.append(1)
        raise KeyError(SECRET_TEXT)

    run_supervised("w", work, reports.append, threading.Event(), RestartPolicy(max_restarts=2, backoff_s=0.0))
    assert len(runs) == 3 and len(reports) == 3
    assert "restart 1 of at most 2" in reports[0] and "KeyError" in reports[0] and "stopped" in reports[-1]
    assert not any(SECRET_TEXT in r for r in reports)


def test_a_crashed_webhook_worker_is_reported_once_restarts_and_delivers_the_next_message(monkeypatch):
    receiver = Receiver()
    receiver.thread.start()
    errors: list[str] = []
    sink = WebhookSink(WebhookConfig(receiver.url), on_error=errors.append, restarts=FAST)
    monkeypatch.setattr(sink, "_post", crash_once(sink._post))
    sink.start()
    try:
        sink.handle(answer(1))  # its POST crashes the worker
        sink.handle(answer(2))
        got = receiver.wait_for(1)
    finally:
        sink.close(timeout=WAIT_S)
        receiver.close()
    assert [json.loads(body)["round"] for _, body in got] == [2]
    assert len(errors) == 1 and "worker crashed (RuntimeError)" in errors[0] and SECRET_TEXT not in errors[0]
    assert sink.delivered == 1


def test_a_crashed_publisher_thread_is_reported_once_and_restarts(monkeypatch):
    sink, errors = RecordingSink(), []
    bus = EventBus()
    publisher = OutputPublisher([sink], on_error=errors.append)
    monkeypatch.setattr(publisher.worker, "_report_drops", crash_once(publisher.worker._report_drops))
    bus.subscribe(publisher)
    publisher.start()
    try:
        bus.publish(answer(1))
        bus.publish(answer(2))
        bus.publish(answer(3))
        rounds = [e.round for e in sink.wait_for(3)]
    finally:
        bus.unsubscribe(publisher)
        publisher.close(timeout=WAIT_S)
    assert rounds == [1, 2, 3] and len(errors) == 1 and "outputs: worker crashed (RuntimeError)" in errors[0], errors
