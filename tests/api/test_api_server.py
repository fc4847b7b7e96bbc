"""The HTTP API end to end: `python -m app --api --model tiny` on a free 127.0.0.1 port, driven by httpx, curl, a
raw socket that never reads, and the official `openai` client. Every route, with bad input."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.support.api_tokens import make_token
from tests.support.app_helpers import app_command, video

READER, ASKER, ADMIN, LIMITED = (make_token(label) for label in ("read", "ask", "all", "lim"))
TOKENS = f"""# token scopes name
{READER} read reader
{ASKER} ask asker
{ADMIN} read,ask,manage admin
{LIMITED} read,ask,manage limited
"""
SSE_QUEUE = 8
WATCHES_PER_TOKEN = 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class Server:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.tokens = tmp / "tokens"
        self.tokens.write_text(TOKENS)
        self.tokens.chmod(0o600)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.output = tmp / "server.txt"
        self.process: subprocess.Popen | None = None
        self.while_starting: list[tuple[int, str | None]] = []  # (status, Retry-After) of a request before ready

    def start(self) -> None:
        # one-second clips: the feed's clips and the watches' checks come every second, not every 4
        args = app_command(
            "--api", "--model", "tiny", "--video", str(video(60)), "--loop", "--port", str(self.port),
            "--api-tokens-file", str(self.tokens), "--timeline", str(self.tmp / "data" / "timeline.sqlite"),
            "--budget", "256", "--window", "16", "--max-new-tokens", "6", "--quiet", "--max-question-chars", "200",
            "--api-sse-queue", str(SSE_QUEUE), "--api-watches-per-token", str(WATCHES_PER_TOKEN),
            "--api-questions-per-token", "1", "--api-answer-timeout", "120", "--fps", "2", "--clip-seconds", "1",
        )  # fmt: skip
        out = open(self.output, "w")
        self.process = subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"}
        )
        deadline = time.monotonic() + 240
        while "api ready" not in self.output.read_text():
            assert self.process.poll() is None, self.output.read_text()[-3000:]
            assert time.monotonic() < deadline, "the API did not start"
            if "api listening" in self.output.read_text() and not self.while_starting:
                early = httpx.get(f"{self.base}/api/v1/streams", headers=auth(READER), timeout=10)
                if "api ready" not in self.output.read_text():  # answered while starting (tests/api/test_api_starting)
                    self.while_starting.append((early.status_code, early.headers.get("retry-after")))
            time.sleep(0.05)

    def stop(self) -> int:
        assert self.process is not None
        self.process.terminate()
        return self.process.wait(60)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    running = Server(tmp_path_factory.mktemp("api"))
    running.start()
    yield running
    if running.process.poll() is None:
        running.stop()


@pytest.fixture
def client(server):
    with httpx.Client(base_url=server.base, timeout=120) as c:
        yield c


def stream_name(client) -> str:
    return client.get("/api/v1/streams", headers=auth(READER)).json()[0]["name"]


# -- who may do what ------------------------------------------------------------------------------------


def test_tokens_and_scopes_decide_who_may_do_what(client):
    assert client.get("/api/v1/streams").status_code == 401  # no token: beyond "loopback without tokens"
    missing = client.get("/api/v1/streams")
    assert missing.headers["www-authenticate"] == "Bearer" and "bearer token" in missing.json()["detail"]
    assert client.get("/api/v1/streams", headers=auth("x" * 30)).status_code == 401
    assert client.get("/api/v1/streams", headers={"Authorization": f"Basic {READER}"}).status_code == 401
    assert client.get("/api/v1/streams", headers=auth(READER)).status_code == 200
    refused = client.post("/api/v1/ask", json={"question": "What?"}, headers=auth(READER))
    assert refused.status_code == 403 and "'ask'" in refused.json()["detail"]
    assert client.post("/api/v1/watches", json={"question": "q?"}, headers=auth(ASKER)).status_code == 403
    assert client.get("/api/v1/streams", headers=auth(ASKER)).status_code == 403  # ask only
    assert client.get("/v1/models", headers=auth(READER)).status_code == 403


def test_the_real_api_listens_before_it_is_ready(server):
    """`python -m app --api` (tests/api/test_api_starting.py for its 503s): "api listening" comes before "api ready",
    and a request that reached it in between was answered 503 with Retry-After."""
    output = server.output.read_text()
    assert 0 <= output.index("api listening on") < output.index("api ready")
    for status, retry_after in server.while_starting:
        assert (status, retry_after) == (503, "5")
    assert httpx.get(f"{server.base}/api/v1/streams", headers=auth(READER)).status_code == 200


def test_the_host_and_origin_guard_applies(client):
    assert client.get("/api/v1/streams", headers={**auth(READER), "Host": "evil.example"}).status_code == 421
    foreign = client.post(
        "/api/v1/ask", json={"question": "q?"}, headers={**auth(ASKER), "Origin": "http://evil.example"}
    )
    assert foreign.status_code == 403


def test_the_tokens_never_reach_the_servers_output(server, client):
    client.get("/api/v1/streams", headers=auth("y" * 40))
    text = server.output.read_text()
    assert not any(token in text for token in (READER, ASKER, ADMIN, LIMITED, "y" * 40))


# -- ask --------------------------------------------------------------------------------------------------


def test_ask_as_json_returns_the_answer_with_its_round_evidence_and_timings(client):
    name = stream_name(client)
    reply = client.post("/api/v1/ask", json={"question": "What is there?", "stream": name}, headers=auth(ADMIN))
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["streams"] == [name] and body["errors"] == []
    (answer,) = body["answers"]
    assert answer["request"] == body["request"] and answer["question"] == "What is there?"
    assert answer["round"] >= 1 and answer["ttft_s"] > 0 and isinstance(answer["evidence"], list)


def test_ask_streamed_over_sse_with_curl(server, client):
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl is not installed")
    done = subprocess.run(
        [curl, "-sN", "-X", "POST", f"{server.base}/api/v1/ask", "-H", f"Authorization: Bearer {ASKER}",
         "-H", "Content-Type: application/json", "-H", "Accept: text/event-stream",
         "-d", json.dumps({"question": "What moves?"})],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    events = parse_sse(done.stdout)
    kinds = [kind for kind, _, _ in events]
    assert kinds[0] == "start" and kinds[-1] == "answer" and "answer_start" in kinds and "piece" in kinds
    request = json.loads(events[0][1])["request"]
    pieces = "".join(json.loads(data)["text"] for kind, data, _ in events if kind == "piece")
    final = json.loads(events[-1][1])
    (answer,) = final["answers"]
    assert final["request"] == request == answer["request"] and answer["type"] == "answer"
    assert answer["answer"].strip() == pieces.strip()


def parse_sse(text: str) -> list[tuple[str, str, str | None]]:
    """(event, data, id) of each event in a text/event-stream body."""
    events = []
    for block in text.split("\n\n"):
        kind, data, ident = "message", [], None
        for line in block.split("\n"):
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
            elif line.startswith("id: "):
                ident = line[4:]
        if data:
            events.append((kind, "\n".join(data), ident))
    return events


def test_bad_questions_get_clear_4xx(client):
    headers = auth(ASKER)
    unknown = client.post("/api/v1/ask", json={"question": "q?", "stream": "garage"}, headers=headers)
    assert unknown.status_code == 404 and "no stream named 'garage'" in unknown.json()["detail"]
    malformed = client.post(
        "/api/v1/ask", content=b"{not json", headers={**headers, "Content-Type": "application/json"}
    )
    assert malformed.status_code == 422
    assert client.post("/api/v1/ask", json={"stream": None}, headers=headers).status_code == 422  # no question
    long = client.post("/api/v1/ask", json={"question": "x" * 201}, headers=headers)
    assert long.status_code == 413 and "at most 200" in long.json()["detail"]
    empty = client.post("/api/v1/ask", json={"question": "   "}, headers=headers)
    assert empty.status_code == 422 and "empty" in empty.json()["detail"]
    huge = client.post(
        "/api/v1/ask", content=b"x" * (65 * 1024), headers={**headers, "Content-Type": "application/json"}
    )
    assert huge.status_code == 413 and "--api-max-body-kb" in huge.json()["detail"]


def test_one_token_may_have_only_its_share_of_questions_waiting(server):
    """--api-questions-per-token 1: while one streamed question waits, the same token's next one is refused."""
    with (
        httpx.Client(base_url=server.base, timeout=120) as first,
        httpx.Client(base_url=server.base, timeout=120) as second,
    ):
        body = {"question": "What is there?", "streaming": True}
        with first.stream("POST", "/api/v1/ask", json=body, headers=auth(LIMITED)) as reply:
            lines = reply.iter_lines()
            assert next(lines) == "event: start"
            refused = second.post("/api/v1/ask", json={"question": "And now?"}, headers=auth(LIMITED))
            assert refused.status_code == 429 and "--api-questions-per-token" in refused.json()["detail"]
            assert refused.headers["retry-after"]
            assert second.post("/api/v1/ask", json={"question": "And now?"}, headers=auth(ASKER)).status_code == 200
            rest = "\n".join(lines)
        assert "event: answer" in rest


# -- streams ----------------------------------------------------------------------------------------------


def test_streams_are_listed_and_sources_follow_the_page_policy(client):
    (stream,) = client.get("/api/v1/streams", headers=auth(READER)).json()
    assert stream["state"] in ("watching", "ended", "reconnecting") and stream["default"]
    assert client.get(f"/api/v1/streams/{stream['name']}", headers=auth(READER)).json()["name"] == stream["name"]
    assert client.get("/api/v1/streams/garage", headers=auth(READER)).status_code == 404
    headers = auth(ADMIN)
    local_file = client.post("/api/v1/streams", json={"name": "extra", "source": str(video(60))}, headers=headers)
    assert local_file.status_code == 403, local_file.text  # a typed path: refused by the source policy
    gst = client.post(
        "/api/v1/streams", json={"name": "extra", "source": "gst:videotestsrc ! appsink"}, headers=headers
    )
    assert gst.status_code == 403
    lan = client.post("/api/v1/streams", json={"name": "extra", "source": "rtsp://192.168.1.20/s"}, headers=headers)
    assert lan.status_code == 403 and "--allow-source-net" in lan.json()["detail"]
    bad_name = client.post("/api/v1/streams", json={"name": "Bad Name", "source": "rtsp://8.8.8.8/s"}, headers=headers)
    assert bad_name.status_code == 422
    taken = client.post(
        "/api/v1/streams", json={"name": stream["name"], "source": "rtsp://x.invalid/"}, headers=headers
    )
    assert taken.status_code == 409
    assert client.delete("/api/v1/streams/garage", headers=headers).status_code == 404
    first = client.delete(f"/api/v1/streams/{stream['name']}", headers=headers)
    assert first.status_code == 409 and "first stream" in first.json()["detail"]
    assert client.post("/api/v1/streams", json={"name": "x"}, headers=headers).status_code == 422


# -- watches ----------------------------------------------------------------------------------------------


def test_a_watch_is_added_changed_listed_and_removed(server, client):
    headers = auth(ADMIN)
    added = client.post(
        "/api/v1/watches",
        json={"name": "square", "question": "Is there a square?", "every": 4, "expires_in_s": 3600},
        headers=headers,
    )
    assert added.status_code == 201, added.text
    view = added.json()
    assert view["origin"] == "runtime" and view["owner"] == "admin" and view["expires_at"] > time.time()
    changed = client.patch("/api/v1/watches/square", json={"threshold": 0.9, "never_expires": True}, headers=headers)
    assert changed.status_code == 200 and changed.json()["threshold"] == 0.9 and changed.json()["expires_at"] is None
    names = [w["name"] for w in client.get("/api/v1/watches", headers=auth(READER)).json()]
    assert "square" in names
    kept = json.loads((server.tmp / "data" / "runtime-watches.json").read_text())
    assert [w["spec"]["name"] for w in kept["watches"]] == ["square"]
    stream = stream_name(client)
    deadline = time.monotonic() + 30  # the worker applied it: the stream lists it
    while "square" not in client.get(f"/api/v1/streams/{stream}", headers=auth(READER)).json()["watches"]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert client.delete("/api/v1/watches/square", headers=headers).status_code == 204
    assert client.get("/api/v1/watches/square", headers=auth(READER)).status_code == 404
    assert client.delete("/api/v1/watches/square", headers=headers).status_code == 404


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"question": ""}, 422, "empty"),
        ({"question": "q?", "every": 0}, 422, "every"),
        ({"question": "q?", "every": "often"}, 422, None),
        ({"question": "q?", "threshold": 3}, 422, "between 0 and 1"),
        ({"question": "q?", "name": "No Spaces"}, 422, "bad alert name"),
        ({"question": "q?", "streams": ["garage"]}, 404, "unknown stream"),
        ({"question": "q?", "expires_in_s": -1}, 422, "expires_in_s"),
        ({"question": "x" * 201}, 422, "too long"),
    ],
)
def test_bad_watches_are_refused(client, body, status, words):
    reply = client.post("/api/v1/watches", json=body, headers=auth(ADMIN))
    assert reply.status_code == status, reply.text
    if words:
        assert words in reply.json()["detail"]


def test_a_watch_in_mqtts_spellings_watches_the_stream_named_at_that_pace(client):
    """`stream` and `every_s` (the README's automations, MQTT's commands) mean `streams` and `every`, not
    "every stream every 10 s"; a key of neither spelling is refused by name."""
    stream, headers = stream_name(client), auth(ADMIN)
    body = {"name": "parcel", "question": "Is there a parcel?", "stream": stream, "every_s": 5, "expires_in_s": 600}
    added = client.post("/api/v1/watches", json=body, headers=headers)
    assert added.status_code == 201, added.text
    assert (added.json()["streams"], added.json()["every"]) == ([stream], 5)
    changed = client.patch("/api/v1/watches/parcel", json={"every_s": 7}, headers=headers)
    assert changed.status_code == 200 and changed.json()["every"] == 7
    typo = client.post("/api/v1/watches", json={"question": "q?", "strem": stream}, headers=headers)
    assert typo.status_code == 422 and "strem" in typo.json()["detail"][0]["msg"]
    assert client.delete("/api/v1/watches/parcel", headers=headers).status_code == 204


def test_a_manage_token_changes_and_removes_only_its_own_watches(client):
    """Two `manage` tokens: the one that did not set a watch gets 409 naming the owner; the owner may."""
    added = client.post("/api/v1/watches", json={"name": "mine", "question": "Is it mine?"}, headers=auth(ADMIN))
    assert added.status_code == 201
    for reply in (client.delete("/api/v1/watches/mine", headers=auth(LIMITED)),
                  client.patch("/api/v1/watches/mine", json={"every": 20}, headers=auth(LIMITED))):  # fmt: skip
        assert reply.status_code == 409 and "set by the token 'admin'" in reply.json()["detail"]
    assert client.delete("/api/v1/watches/mine", headers=auth(ADMIN)).status_code == 204


def test_a_token_past_its_watch_limit_gets_429_and_the_assistant_keeps_answering(client):
    headers = auth(LIMITED)
    made = [
        client.post("/api/v1/watches", json={"question": f"Is thing {k} there?"}, headers=headers) for k in range(3)
    ]
    assert [r.status_code for r in made] == [201] * WATCHES_PER_TOKEN
    refused = [client.post("/api/v1/watches", json={"question": "one more?"}, headers=headers) for _ in range(50)]
    assert {r.status_code for r in refused} == {429}
    assert f"{WATCHES_PER_TOKEN} watches" in refused[0].json()["detail"]
    assert client.post("/api/v1/ask", json={"question": "Still there?"}, headers=auth(ASKER)).status_code == 200
    for reply in made:
        assert client.delete(f"/api/v1/watches/{reply.json()['name']}", headers=headers).status_code == 204


def test_a_one_shot_watch_alerts_once_and_ends_itself(server, client):
    """threshold 0 and on_after 1: the first check begins its alert; the watch then ends (reason one-shot). Its
    `watch` events say when it began to run on the stream and when it ended there."""
    with httpx.Client(base_url=server.base, timeout=60) as feed:
        with feed.stream("GET", "/api/v1/events?types=alert,watch", headers=auth(READER)) as events:
            lines = events.iter_lines()
            assert next(lines) == ": connected"
            added = client.post(
                "/api/v1/watches",
                json={"name": "once", "question": "Is anything there?", "every": 1, "threshold": 0, "on_after": 1,
                      "one_shot": True},
                headers=auth(ADMIN),
            )  # fmt: skip
            assert added.status_code == 201
            records = []
            for line in lines:  # another test's removed watches may still be ending: only this watch's records
                if line.startswith("data: ") and json.loads(line[6:]).get("alert") == "once":
                    records.append(json.loads(line[6:]))
                if len(records) == 4:
                    break
    steps = [(r["type"], r["alert"], r.get("state") or r["change"]) for r in records]
    assert steps == [("watch", "once", "set"), ("alert", "once", "begin"), ("alert", "once", "end"),
                     ("watch", "once", "ended")]  # fmt: skip
    assert records[2]["reason"] == records[3]["reason"] == "one-shot"
    assert client.get("/api/v1/watches/once", headers=auth(READER)).status_code == 404


# -- events -----------------------------------------------------------------------------------------------


def read_events(server, path: str, headers: dict, count: int) -> list[tuple[str, str, str | None]]:
    got: list[tuple[str, str, str | None]] = []
    with httpx.Client(base_url=server.base, timeout=60) as feed:
        with feed.stream("GET", path, headers=headers) as reply:
            assert reply.status_code == 200, reply.read()
            block = ""
            for line in reply.iter_lines():
                if line:
                    block += line + "\n"
                    continue
                got += parse_sse(block + "\n")
                block = ""
                if len(got) >= count:
                    return got
    return got


def test_the_events_feed_filters_by_type_and_resumes_after_last_event_id(server, client):
    name = stream_name(client)
    first = read_events(server, f"/api/v1/events?types=clip&stream={name}", auth(READER), 3)
    assert [kind for kind, _, _ in first] == ["clip"] * 3
    assert all(json.loads(data)["stream"] == name for _, data, _ in first)
    ids = [int(i) for _, _, i in first]
    assert ids == sorted(ids)
    again = read_events(server, "/api/v1/events?types=clip", {**auth(READER), "Last-Event-ID": str(ids[0])}, 2)
    assert [int(i) for _, _, i in again] == ids[1:3]  # replayed from the buffer: nothing lost in between
    earlier_run = read_events(server, "/api/v1/events?types=clip", {**auth(READER), "Last-Event-ID": "1"}, 2)
    assert earlier_run[0][0] == "reset" and earlier_run[1][0] in ("gap", "clip")  # 1: an id of no run since
    assert client.get("/api/v1/events?types=nonsense", headers=auth(READER)).status_code == 422
    assert client.get("/api/v1/events?stream=garage", headers=auth(READER)).status_code == 404
    bad_id = client.get("/api/v1/events", headers={**auth(READER), "Last-Event-ID": "abc"})
    assert bad_id.status_code == 422


@pytest.mark.parametrize("last", [b"9" * 5000, "\u00b2".encode("latin-1")])  # int() refuses both; isdigit() not
def test_a_last_event_id_no_feed_could_send_is_422_not_a_crash(server, client, last):
    with client.stream("GET", "/api/v1/events", headers={**auth(READER), "Last-Event-ID": last}) as reply:
        assert reply.status_code == 422
        assert "Last-Event-ID" in json.loads(reply.read())["detail"]


def test_a_never_reading_feed_client_holds_nothing_up(server, client):
    """A feed client that never reads: questions are still answered. (Loopback's socket buffers take megabytes
    before its mailbox fills; the drop itself is tested on the feed in tests/api/test_api_feed.py.)"""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
    sock.connect(("127.0.0.1", server.port))
    request = f"GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {READER}\r\n\r\n"
    sock.sendall(request.encode())  # and never reads
    try:
        for k in range(3):
            reply = client.post("/api/v1/ask", json={"question": f"What is there now ({k})?"}, headers=auth(ASKER))
            assert reply.status_code == 200 and reply.json()["answers"], reply.text
        assert client.get("/api/v1/status", headers=auth(READER)).json()["feed"]["clients"] >= 1
    finally:
        sock.close()


# -- history ----------------------------------------------------------------------------------------------


def test_history_search_and_thumbnails(client):
    client.post("/api/v1/ask", json={"question": "What colour is it?"}, headers=auth(ASKER))
    moments = client.get("/api/v1/history", params={"limit": 50}, headers=auth(READER))
    assert moments.status_code == 200 and moments.json()
    assert {"id", "kind", "stream", "text", "has_thumbnail"} <= set(moments.json()[0])
    with_thumbnail = [m for m in moments.json() if m["has_thumbnail"]]
    if with_thumbnail:
        jpeg = client.get(f"/api/v1/history/{with_thumbnail[0]['id']}/thumbnail", headers=auth(READER))
        assert jpeg.headers["content-type"] == "image/jpeg" and jpeg.content[:2] == b"\xff\xd8"
    assert client.get("/api/v1/history/999999999/thumbnail", headers=auth(READER)).status_code == 404
    assert client.get("/api/v1/history", params={"limit": 0}, headers=auth(READER)).status_code == 422
    assert client.get("/api/v1/history/notanumber/thumbnail", headers=auth(READER)).status_code == 422


def test_history_ids_and_streams_that_cannot_be_there_are_404(client):
    for row_id in (2**63, 10**40):  # past SQLite's 64-bit integers
        beyond = client.get(f"/api/v1/history/{row_id}/thumbnail", headers=auth(READER))
        assert beyond.status_code == 404, beyond.text
    stream = stream_name(client)
    nope = client.get("/api/v1/history", params={"stream": "nope"}, headers=auth(READER))
    assert nope.status_code == 404 and "'nope'" in nope.json()["detail"] and stream in nope.json()["detail"]
    assert client.get("/api/v1/history", params={"stream": stream}, headers=auth(READER)).status_code == 200


# -- OpenAI-compatible chat ---------------------------------------------------------------------------------


def test_the_openai_client_lists_streams_as_models_and_chats_with_and_without_streaming(server, client):
    from openai import AuthenticationError, NotFoundError, OpenAI, PermissionDeniedError

    ai = OpenAI(base_url=f"{server.base}/v1", api_key=ASKER, timeout=120, max_retries=0)
    name = stream_name(client)
    assert [m.id for m in ai.models.list()] == ["all", name]
    messages = [
        {"role": "system", "content": "You are a camera."},
        {"role": "user", "content": "Is anyone there?"},
        {"role": "assistant", "content": "No one."},
        {"role": "user", "content": "What is there now?"},
    ]
    reply = ai.chat.completions.create(model=name, messages=messages)
    assert reply.object == "chat.completion" and reply.choices[0].message.role == "assistant"
    assert reply.choices[0].finish_reason == "stop" and reply.choices[0].message.content
    evidence = reply.model_extra["evidence"]
    assert isinstance(evidence, list)
    if evidence:
        assert "Seen at" in reply.choices[0].message.content
    # the question went to the assistant with the earlier turns in front, as one context line
    expected = "(Earlier in this conversation: user: Is anyone there? | assistant: No one.)\nWhat is there now?"
    deadline = time.monotonic() + 30  # the timeline is written off the model's thread
    while not any(
        m["question"] == expected
        for m in client.get("/api/v1/history", params={"limit": 50}, headers=auth(READER)).json()
    ):
        assert time.monotonic() < deadline, "the question with its context never reached the timeline"
        time.sleep(0.1)

    chunks = list(
        ai.chat.completions.create(model="all", messages=[{"role": "user", "content": "Colours?"}], stream=True)
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == "stop" and "evidence" in chunks[-1].model_extra
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text.strip()

    with pytest.raises(NotFoundError) as missing:
        ai.chat.completions.create(model="garage", messages=[{"role": "user", "content": "q?"}])
    assert missing.value.param == "model" and f"all, {name}" in missing.value.message
    with pytest.raises(AuthenticationError) as unknown:
        OpenAI(base_url=f"{server.base}/v1", api_key="z" * 30, max_retries=0).models.list()
    assert unknown.value.type == "authentication_error" and "unknown token" in unknown.value.message
    with pytest.raises(PermissionDeniedError) as lacking:
        OpenAI(base_url=f"{server.base}/v1", api_key=READER, max_retries=0).models.list()
    assert "'ask'" in lacking.value.message


def test_the_openai_client_gets_usage_a_token_limit_model_cards_and_refusals_naming_the_param(server, client):
    """The real model (--max-new-tokens 6): usage counted from the answer events, max_tokens 1 keeps at most one
    token (cut answers are checked piece by piece in tests/api/test_openai_chat.py)."""
    from openai import BadRequestError, NotFoundError, OpenAI

    ai = OpenAI(base_url=f"{server.base}/v1", api_key=ASKER, timeout=120, max_retries=0)
    name = stream_name(client)
    assert ai.models.retrieve(name).id == name
    with pytest.raises(NotFoundError) as missing:
        ai.models.retrieve("garage")
    assert missing.value.type == "not_found_error" and f"all, {name}" in missing.value.message
    with pytest.raises(BadRequestError) as refused:
        ai.chat.completions.create(model=name, messages=[{"role": "user", "content": "q?"}], n=2)
    assert refused.value.param == "n"
    whole = ai.chat.completions.create(model=name, messages=[{"role": "user", "content": "What is there?"}])
    assert whole.usage.prompt_tokens > 0 and whole.usage.completion_tokens <= 6
    assert whole.usage.total_tokens == whole.usage.prompt_tokens + whole.usage.completion_tokens
    chunks = list(
        ai.chat.completions.create(
            model=name,
            messages=[{"role": "user", "content": "What is there now?"}],
            stream=True,
            max_tokens=1,
            stream_options={"include_usage": True},
        )
    )
    *answer, last = chunks
    assert last.choices == [] and last.usage.prompt_tokens > 0 and last.usage.completion_tokens <= 1
    finish = answer[-1].choices[0].finish_reason
    assert finish in ("length", "stop") and (finish == "stop" or last.usage.completion_tokens == 1)
    pieces = [c.choices[0].delta.content for c in answer[1:-1] if not c.choices[0].delta.content.startswith("\n")]
    assert len(pieces) <= 1  # the one token, then the "Seen at" line


def test_chat_streams_end_with_done_for_plain_http_clients(client):
    body = {"model": "all", "stream": True, "messages": [{"role": "user", "content": "Anything?"}]}
    with client.stream("POST", "/v1/chat/completions", json=body, headers=auth(ASKER)) as reply:
        lines = [line for line in reply.iter_lines() if line]
    assert lines[-1] == "data: [DONE]" and all(line.startswith("data: ") for line in lines)
    assert json.loads(lines[0][6:])["object"] == "chat.completion.chunk"
    no_user = client.post(
        "/v1/chat/completions",
        json={"model": "all", "messages": [{"role": "system", "content": "x"}]},
        headers=auth(ASKER),
    )
    assert no_user.status_code == 400 and no_user.json()["error"]["param"] == "messages"
    assert "user message" in no_user.json()["error"]["message"]
    long = {"model": "all", "messages": [{"role": "user", "content": "x" * 201}]}
    too_long = client.post("/v1/chat/completions", json=long, headers=auth(ASKER))
    assert too_long.status_code == 413 and "at most 200" in too_long.json()["error"]["message"]
    no_messages = client.post("/v1/chat/completions", json={"model": "all"}, headers=auth(ASKER))
    assert no_messages.status_code == 422 and no_messages.json()["error"]["param"] == "messages"


# -- the OpenAPI schema -----------------------------------------------------------------------------------


def test_the_openapi_schema_lists_exactly_the_routes_served(server, client):
    schema = client.get("/api/v1/openapi.json", headers=auth(READER)).json()
    assert schema["openapi"].startswith("3.")
    documented = {(path, method.upper()) for path, ops in schema["paths"].items() for method in ops}
    expected = {
        ("/api/v1/ask", "POST"),
        ("/api/v1/streams", "GET"),
        ("/api/v1/streams", "POST"),
        ("/api/v1/streams/{name}", "GET"),
        ("/api/v1/streams/{name}", "DELETE"),
        ("/api/v1/watches", "GET"),
        ("/api/v1/watches", "POST"),
        ("/api/v1/watches/{name}", "GET"),
        ("/api/v1/watches/{name}", "PATCH"),
        ("/api/v1/watches/{name}", "DELETE"),
        ("/api/v1/events", "GET"),
        ("/api/v1/status", "GET"),
        ("/api/v1/history", "GET"),
        ("/api/v1/history/{row_id}/thumbnail", "GET"),
        ("/api/v1/history/summary", "GET"),
        ("/api/v1/history/recap", "GET"),
        ("/api/v1/history/day.png", "GET"),
        ("/v1/models", "GET"),
        ("/v1/models/{model}", "GET"),
        ("/v1/chat/completions", "POST"),
    }
    assert documented == expected
    assert "HTTPBearer" in schema["components"]["securitySchemes"]
    for path, method in expected:  # every documented route answers (here: without a token, 401)
        concrete = path.replace("{name}", "x").replace("{row_id}", "1").replace("{model}", "x")
        assert client.request(method, concrete).status_code == 401, (method, path)
    assert client.get("/api/v1/nothing", headers=auth(READER)).status_code == 404


def test_the_server_stops_cleanly_on_sigterm_and_keeps_its_watches(server, client):
    """Last in this module: runtime watches survive a restart of the server."""
    added = client.post("/api/v1/watches", json={"name": "kept", "question": "Is it kept?"}, headers=auth(ADMIN))
    assert added.status_code == 201
    assert server.stop() == 0
    server.start()
    with httpx.Client(base_url=server.base, timeout=60) as again:
        kept = again.get("/api/v1/watches/kept", headers=auth(READER))
        assert kept.status_code == 200 and kept.json()["owner"] == "admin"
