"""The HTTP API on the fleet's head, on a real Ray cluster of two host nodes on this machine
(tests/support/ray_cluster.py): `python -m app --ray ADDRESS --api --model tiny --stream a=... --stream b=...` on a
free 127.0.0.1 port, driven by httpx and the official `openai` client. Each request reaches the host that owns its
stream: questions (JSON and streamed) are answered by that stream's host with evidence and timings; streams are
listed with their hosts, added (the source policy first, then the fleet's: network sources only) and removed; a
runtime watch set on the head is checked by its stream's host (its checks in the events feed), changed and
removed, kept in the head's state file; the history is the head's timeline. One fleet for the whole file (on the
session's cluster, its data folder the fleet's own), stopped with SIGINT whatever happened."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.api.test_api_server import free_port, parse_sse
from tests.support.api_tokens import make_token
from tests.support.app_helpers import app_command, video
from tests.support.ray_cluster import lease_for
from timeline.config import DATA_ENV

pytest.importorskip("ray")
openai = pytest.importorskip("openai")

WAIT_S = 240  # bound on the start (two hosts load the tiny model)
TIMEOUT_S = 120  # bound on each request
ADMIN, READER = make_token("all"), make_token("read")
TOKENS = f"{ADMIN} read,ask,manage admin\n{READER} read reader\n"


def auth(token: str = ADMIN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class FleetApi:
    """The head's process: output collected in a file, `api ready` awaited, stopped with SIGINT."""

    def __init__(self, tmp: Path, address: str) -> None:
        self.tmp, self.port = tmp, free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        tokens = tmp / "tokens"
        tokens.write_text(TOKENS)
        tokens.chmod(0o600)
        self.data = tmp / "data"
        self.output = tmp / "head.txt"
        clip = str(video(20))
        args = app_command(
            "--ray", address, "--api", "--port", str(self.port), "--model", "tiny",
            "--stream", f"a={clip}", "--stream", f"b={clip}", "--loop", "--every", "0", "--budget", "256",
            "--window", "16", "--max-new-tokens", "6", "--quiet", "--api-tokens-file", str(tokens),
            "--timeline", str(self.data / "timeline.sqlite"), "--api-answer-timeout", str(TIMEOUT_S),
            "--allow-source-net", "127.0.0.1/32",
        )  # fmt: skip
        with open(self.output, "w") as out:
            self.process = subprocess.Popen(
                args, stdout=out, stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1", DATA_ENV: str(self.data)},
            )  # fmt: skip

    def text(self) -> str:
        return self.output.read_text()

    def wait_ready(self) -> None:
        deadline = time.monotonic() + WAIT_S
        while "api ready" not in self.text():
            assert self.process.poll() is None, self.text()[-4000:]
            assert time.monotonic() < deadline, "the fleet's API did not start:\n" + self.text()[-4000:]
            time.sleep(0.3)

    def interrupt(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(2)
        try:
            return self.process.wait(90)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
            raise AssertionError("the head did not exit within 90 s of SIGINT:\n" + self.text()[-4000:]) from None


@pytest.fixture(scope="module")
def head(tmp_path_factory, shared_ray_cluster_pool, request):
    tmp = tmp_path_factory.mktemp("fleet-api")
    with lease_for(shared_ray_cluster_pool, request, tmp / "data") as cluster:
        running = FleetApi(tmp, cluster.address)
        try:
            running.wait_ready()
            yield running
        finally:
            code = running.interrupt()
    assert code == 0 and "Traceback" not in running.text(), running.text()[-4000:]


@pytest.fixture(scope="module")
def client(head):
    with httpx.Client(base_url=head.base, timeout=TIMEOUT_S) as c:
        yield c


def streams_once_watching(client, names: set[str]) -> dict[str, dict]:
    """The streams, once every one of `names` has a host and a clip."""
    deadline = time.monotonic() + WAIT_S
    while True:
        views = {s["name"]: s for s in client.get("/api/v1/streams", headers=auth()).json()}
        if all(n in views and views[n]["host"] and views[n]["clips"] > 0 for n in names):
            return views
        assert time.monotonic() < deadline, f"streams not running: {views}"
        time.sleep(0.5)


def test_streams_are_listed_with_the_host_each_runs_on(client):
    views = streams_once_watching(client, {"a", "b"})
    assert set(views) == {"a", "b"}
    assert views["a"]["host"] != views["b"]["host"]  # one on each node
    assert {views["a"]["host"][:2], views["b"]["host"][:2]} == {"a-", "b-"}
    assert views["a"]["state"] == "watching" and views["a"]["stream_time"] > 0
    one = client.get("/api/v1/streams/b", headers=auth())
    assert one.status_code == 200 and one.json()["host"] == views["b"]["host"]
    assert client.get("/api/v1/streams/nope", headers=auth()).status_code == 404
    assert client.get("/api/v1/streams").status_code == 401
    status = client.get("/api/v1/status", headers=auth(READER)).json()
    assert status["streams"] == 2


def test_a_question_as_json_is_answered_by_its_streams_host(client):
    streams_once_watching(client, {"a", "b"})
    reply = client.post("/api/v1/ask", json={"question": "What is there?", "stream": "b"}, headers=auth())
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["streams"] == ["b"] and body["errors"] == []
    (answer,) = body["answers"]
    assert answer["stream"] == "b" and answer["request"] == body["request"]
    assert answer["ttft_s"] > 0 and isinstance(answer["evidence"], list) and answer["round"] >= 1
    every = client.post("/api/v1/ask", json={"question": "Anything new?"}, headers=auth()).json()
    assert every["streams"] == ["a", "b"] and sorted(a["stream"] for a in every["answers"]) == ["a", "b"]
    unknown = client.post("/api/v1/ask", json={"question": "q?", "stream": "garage"}, headers=auth())
    assert unknown.status_code == 404 and "garage" in unknown.json()["detail"]
    refused = client.post("/api/v1/ask", json={"question": "q?"}, headers=auth(READER))
    assert refused.status_code == 403


def test_a_question_streamed_over_sse_comes_piece_by_piece_from_the_host(client):
    streams_once_watching(client, {"a"})
    body = {"question": "What moves?", "stream": "a", "streaming": True}
    with client.stream("POST", "/api/v1/ask", json=body, headers=auth()) as reply:
        assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/event-stream")
        events = parse_sse(reply.read().decode())
    kinds = [kind for kind, _, _ in events]
    assert kinds[0] == "start" and kinds[-1] == "answer" and "answer_start" in kinds and "piece" in kinds
    request = json.loads(events[0][1])["request"]
    pieces = "".join(json.loads(data)["text"] for kind, data, _ in events if kind == "piece")
    final = json.loads(events[-1][1])
    (answer,) = final["answers"]
    assert final["request"] == request == answer["request"] and answer["stream"] == "a"
    assert answer["answer"].strip() == pieces.strip()


def test_the_openai_client_asks_a_stream_of_the_fleet(head, client):
    streams_once_watching(client, {"a", "b"})
    ai = openai.OpenAI(base_url=f"{head.base}/v1", api_key=ADMIN, timeout=TIMEOUT_S, max_retries=0)
    assert [m.id for m in ai.models.list()] == ["all", "a", "b"]
    reply = ai.chat.completions.create(model="b", messages=[{"role": "user", "content": "Is anyone there?"}])
    assert reply.choices[0].message.content and isinstance(reply.model_extra["evidence"], list)
    chunks = list(
        ai.chat.completions.create(model="a", stream=True, messages=[{"role": "user", "content": "What is it?"}])
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks).strip()
    assert chunks[-1].choices[0].finish_reason == "stop" and "evidence" in chunks[-1].model_extra
    with pytest.raises(openai.NotFoundError):
        ai.chat.completions.create(model="garage", messages=[{"role": "user", "content": "q?"}])


def test_a_runtime_watch_is_checked_by_its_streams_host_and_kept_on_the_head(head, client):
    streams_once_watching(client, {"a", "b"})
    watch = {"name": "red", "question": "Is it red?", "streams": ["a"], "every": 1, "expires_in_s": 3600}
    added = client.post("/api/v1/watches", json=watch, headers=auth())
    assert added.status_code == 201, added.text
    assert added.json()["origin"] == "runtime" and added.json()["owner"] == "admin"
    kept = json.loads((head.data / "runtime-watches.json").read_text())
    assert [w["spec"]["name"] for w in kept["watches"]] == ["red"]
    checks = feed_records(client, "/api/v1/events?types=check&stream=a", want=2)
    assert {r["alert"] for r in checks} == {"red"} and {r["stream"] for r in checks} == {"a"}
    assert "red" in client.get("/api/v1/streams/a", headers=auth()).json()["watches"]
    assert "red" not in client.get("/api/v1/streams/b", headers=auth()).json()["watches"]
    changed = client.patch("/api/v1/watches/red", json={"threshold": 0.9}, headers=auth())
    assert changed.status_code == 200 and changed.json()["threshold"] == 0.9
    assert [w["name"] for w in client.get("/api/v1/watches", headers=auth()).json()] == ["red"]
    bad = client.post("/api/v1/watches", json={"question": "q?", "streams": ["garage"]}, headers=auth())
    assert bad.status_code == 404
    assert client.delete("/api/v1/watches/red", headers=auth()).status_code == 204
    assert json.loads((head.data / "runtime-watches.json").read_text())["watches"] == []
    assert client.get("/api/v1/watches/red", headers=auth()).status_code == 404


def feed_records(client, path: str, want: int) -> list[dict]:
    """The first `want` event records of the feed at `path` (bounded in time)."""
    records: list[dict] = []
    deadline = time.monotonic() + TIMEOUT_S
    with client.stream("GET", path, headers=auth(READER)) as feed:
        assert feed.status_code == 200
        for line in feed.iter_lines():
            if line.startswith("data: "):
                records.append(json.loads(line[6:]))
            if len(records) >= want or time.monotonic() > deadline:
                break
    assert len(records) >= want, records
    return records


def test_streams_are_added_as_the_page_adds_them_and_removed(client):
    streams_once_watching(client, {"a", "b"})
    refused = client.post("/api/v1/streams", json={"name": "c", "source": "/etc/hostname"}, headers=auth())
    assert refused.status_code == 403  # the source policy: no local paths
    outside = client.post("/api/v1/streams", json={"name": "c", "source": "http://10.1.2.3/x"}, headers=auth())
    assert outside.status_code == 403  # a private net not allowed by --allow-source-net
    url = f"http://127.0.0.1:{free_port()}/cam"  # nothing listens: the stream waits for its source, reconnecting
    added = client.post("/api/v1/streams", json={"name": "c", "source": url}, headers=auth())
    assert added.status_code == 201, added.text
    assert client.post("/api/v1/streams", json={"name": "c", "source": url}, headers=auth()).status_code == 409
    deadline = time.monotonic() + WAIT_S
    while not client.get("/api/v1/streams/c", headers=auth()).json()["host"]:
        assert time.monotonic() < deadline, "stream c was not placed"
        time.sleep(0.5)
    assert client.delete("/api/v1/streams/c", headers=auth()).status_code == 204
    assert client.get("/api/v1/streams/c", headers=auth()).status_code == 404
    assert [s["name"] for s in client.get("/api/v1/streams", headers=auth()).json()] == ["a", "b"]


def test_the_history_is_the_heads_timeline(client):
    client.post("/api/v1/ask", json={"question": "Where is the ball?", "stream": "a"}, headers=auth())
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        rows = client.get("/api/v1/history?text=ball&limit=5", headers=auth(READER))
        assert rows.status_code == 200, rows.text
        if rows.json():
            break
        assert time.monotonic() < deadline, "the answer never reached the head's timeline"
        time.sleep(0.5)
    assert rows.json()[0]["stream"] == "a" and rows.json()[0]["question"] == "Where is the ball?"
