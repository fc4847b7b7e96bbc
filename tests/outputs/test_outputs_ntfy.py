"""The ntfy output (outputs/ntfy.py), the example of a sink that is one small class with a `send`: fed by
the publisher through `QueuedSink`, it POSTs one line per alert begin to a real HTTP server on 127.0.0.1, and a
receiver that fails is reported by type while the next alert still goes out."""

from __future__ import annotations

import http.server
import threading

import pytest

from bus import Alert, Answer, AnswerStats, EventBus
from outputs import OutputPublisher
from outputs.ntfy import NtfyConfig, NtfySink
from outputs.queued_sink import QueuedSink
from tests.support.in_process_main import run_app_here

WAIT_S = 20.0


class Topic:
    """An ntfy stand-in: records each POST (its headers and body); answers 500 while `failing` is set."""

    def __init__(self) -> None:
        self.posts: list[tuple[dict[str, str], str]] = []
        self.failing = threading.Event()
        self.got = threading.Condition()
        topic = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the http.server name)
                body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
                self.send_response(500 if topic.failing.is_set() else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()
                with topic.got:
                    topic.posts.append((dict(self.headers), body))
                    topic.got.notify_all()

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/door-alerts"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def wait_for(self, count: int) -> list[tuple[dict[str, str], str]]:
        with self.got:
            assert self.got.wait_for(lambda: len(self.posts) >= count, WAIT_S), f"{len(self.posts)} posts"
            return list(self.posts)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def topic():
    served = Topic()
    yield served
    served.close()


def alert(n: int, state: str = "begin") -> Alert:
    return Alert(stream="door", id=f"door-person-{n}", alert="person\r\nX-Injected: 1", state=state, p_yes=0.91,
                 stream_time=40.0 + n, question="Is a person at the door?")  # fmt: skip


def test_alert_begins_become_ntfy_posts_and_a_failing_topic_is_reported_by_type(topic):
    errors: list[str] = []
    bus = EventBus()
    publisher = OutputPublisher([QueuedSink(NtfySink(NtfyConfig(topic.url)), on_error=errors.append)])
    bus.subscribe(publisher)
    publisher.start()
    try:
        bus.publish(Answer(stream="door", stats=AnswerStats(round=1, question="q", answer="a")))  # not for ntfy
        bus.publish(alert(1))
        bus.publish(alert(1, state="end"))  # only begins are sent
        headers, body = topic.wait_for(1)[0]
        topic.failing.set()
        bus.publish(alert(2))
        topic.wait_for(2)
        topic.failing.clear()
        bus.publish(alert(3))
        posts = topic.wait_for(3)
    finally:
        bus.unsubscribe(publisher)
        publisher.close(timeout=5.0)
    assert body == "person\r\nX-Injected: 1 began on door at t=41 s (p_yes 0.91)"  # the body: the text as said
    assert "began on door at t=41 s (p_yes 0.91)" in body
    assert headers["Title"] == "alert person??X-Injected: 1" and "X-Injected" not in headers  # no header split
    assert headers["Priority"] == "4" and len(posts) == 3 and "t=43 s" in posts[2][1]
    port = topic.url.split(":")[2].split("/")[0]
    assert errors == [f"output ntfy http://127.0.0.1:{port}/… failed on a alert event (PostError)"]
    assert "door-alerts" not in errors[0]  # the topic (a secret of sorts) is never in a message


def test_a_bad_ntfy_config_says_what_is_allowed():
    with pytest.raises(ValueError, match="priority must be one of 1, 2, 3, 4, 5"):
        NtfyConfig("https://ntfy.sh/x", priority=9)
    with pytest.raises(ValueError, match="ntfy URL 'https://ntfy.sh/…' must not hold credentials") as refused:
        NtfyConfig("https://me:pw@ntfy.sh/x")
    assert "pw" not in str(refused.value) and "webhook" not in str(refused.value)
    done = run_app_here("--video", "x.mp4", "--ntfy", "ftp://ntfy.sh/x")
    assert done.returncode == 2 and "ntfy URL must be http://HOST[:PORT]/PATH" in done.stderr
