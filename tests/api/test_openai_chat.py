"""`/v1/*` as OpenAI's clients meet it, in process: the API's real routes, middleware and question plumbing
(api.asking, api.ask) over a stand-in assistant that answers at once with scripted pieces (one per token, as the
model worker publishes them), driven by the official `openai` package and httpx. The same routes over a real
server and the tiny model: tests/api/test_api_server.py."""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from fastapi.testclient import TestClient

from api.asking import Asks
from api.auth import Access, parse_tokens
from api.config import ApiConfig
from api.context import ApiContext
from api.feed import EventFeed
from api.openai_reply import seen_at
from api.openai_request import without_evidence
from api.server import RunningApi, api_routes, headless_app
from bus import Answer, AnswerPiece, AnswerStart, AnswerStats, ErrorEvent, EventBus, EvidenceSpan
from bus.input_limits import InputLimits
from tests.support.api_tokens import make_token
from ui.guard import HostRule
from ui.login_throttle import LoginThrottle

ASKER, READER = make_token("asker"), make_token("reader")
PIECES = ("A", " red", " van", " at", " the", " door", ".")
PROMPT_TOKENS = 9
BASE = "http://127.0.0.1"


class Camera:
    """A stand-in for the assistant: `ask` publishes each stream's answer on its bus at once (answer_start, one
    piece per token, the answer with one moment of evidence), as the model worker does. `silent`: questions are
    queued and never answered. `busy`: refused as a full queue refuses them. `failing`: streams whose answer
    fails after two pieces (an error event instead of the answer)."""

    def __init__(self) -> None:
        self.bus = EventBus()
        self.streams = {"door": None, "yard": None}
        self.input_limits = InputLimits(max_question_chars=200)
        self.asked: list[str] = []
        self.silent = self.busy = False
        self.failing: set[str] = set()

    def desk_streams(self):  # the desk's streams by name (bus.desk): only names are read
        return dict.fromkeys(self.streams)

    def ask(self, question: str, stream: str | None = None, request: str | None = None) -> list[str]:
        if self.busy:
            raise self.input_limits.busy()
        names = list(self.streams) if stream is None else [stream]
        self.asked.append(question)
        for name in names if not self.silent else ():
            self.bus.publish(AnswerStart(stream=name, round=1, question=question, request=request))
            for piece in PIECES[:2] if name in self.failing else PIECES:
                self.bus.publish(AnswerPiece(stream=name, round=1, text=piece, request=request))
            if name in self.failing:
                self.bus.publish(ErrorEvent(stream=name, where="answer", message="round 1 failed", request=request))
                continue
            span = EvidenceSpan(stream=name, start=12.0, end=16.0, source="attention", score=0.5)
            stats = AnswerStats(
                round=1,
                question=question,
                answer="".join(PIECES),
                answer_tokens=len(PIECES),
                prefill_tokens=PROMPT_TOKENS,
                evidence=(span,),
            )
            self.bus.publish(Answer(stream=name, stats=stats, request=request))
        return names


@pytest.fixture
def camera():
    return Camera()


@pytest.fixture
def http(camera):
    asks = Asks(camera, per_token=4)
    camera.bus.subscribe(asks)
    tokens = parse_tokens(f"{ASKER} ask asker\n{READER} read reader", "test")
    settings = ApiConfig(max_body_kb=2, answer_timeout_s=0.3)
    feed = EventFeed(replay=10, queue=10, max_clients=2)
    context = ApiContext(camera, None, feed, asks, Access(tokens), None, None, settings)
    app = headless_app(RunningApi(context, api_routes(context)), HostRule("127.0.0.1"), LoginThrottle())
    with TestClient(app, base_url=BASE) as client:
        yield client


@pytest.fixture
def ai(http):
    return openai.OpenAI(base_url=f"{BASE}/v1", api_key=ASKER, http_client=http, max_retries=0)


def ask(text: str = "What is at the door?") -> list[dict]:
    return [{"role": "user", "content": text}]


def error_of(reply: httpx.Response) -> dict:
    body = reply.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    return body["error"]


# -- refusals: OpenAI's error object -----------------------------------------------------------------------


def test_the_openai_client_gets_the_reason_of_each_refusal(http, ai, camera):
    with pytest.raises(openai.AuthenticationError) as err:
        openai.OpenAI(base_url=f"{BASE}/v1", api_key="z" * 30, http_client=http, max_retries=0).models.list()
    assert (err.value.type, err.value.code) == ("authentication_error", "invalid_api_key")
    assert "unknown token" in err.value.message
    with pytest.raises(openai.PermissionDeniedError) as err:
        openai.OpenAI(base_url=f"{BASE}/v1", api_key=READER, http_client=http, max_retries=0).models.list()
    assert err.value.type == "permission_error" and "'ask'" in err.value.message
    with pytest.raises(openai.NotFoundError) as err:
        ai.chat.completions.create(model="garage", messages=ask())
    assert (err.value.type, err.value.param, err.value.code) == ("not_found_error", "model", "model_not_found")
    assert "'garage'" in err.value.message and "all, door, yard" in err.value.message
    with pytest.raises(openai.APIStatusError) as err:
        ai.chat.completions.create(model="door", messages=ask("x" * 201))
    assert err.value.status_code == 413 and err.value.param == "messages[0].content" and "at most 200" in str(err.value)
    camera.busy = True
    with pytest.raises(openai.RateLimitError) as err:
        ai.chat.completions.create(model="door", messages=ask())
    assert err.value.type == "rate_limit_exceeded" and "--max-pending-questions" in err.value.message
    assert err.value.response.headers["retry-after"]
    camera.busy, camera.silent = False, True
    with pytest.raises(openai.InternalServerError) as err:
        ai.chat.completions.create(model="door", messages=ask())
    assert err.value.status_code == 504 and err.value.type == "timeout_error" and "no answer within" in str(err.value)
    assert camera.asked == ["What is at the door?"]  # only the last one reached the assistant


def test_request_validation_errors_name_the_param(http):
    headers = {"Authorization": f"Bearer {ASKER}"}
    missing = http.post("/v1/chat/completions", json={"model": "door"}, headers=headers)
    assert missing.status_code == 422
    error = error_of(missing)
    assert (error["type"], error["param"]) == ("invalid_request_error", "messages") and "Field required" in error[
        "message"
    ]
    wrong = http.post("/v1/chat/completions", json={"model": "door", "messages": [{"content": "hi"}]}, headers=headers)
    assert error_of(wrong)["param"] == "messages[0].role"
    garbled = http.post(
        "/v1/chat/completions", content=b"{nope", headers={**headers, "Content-Type": "application/json"}
    )
    assert garbled.status_code == 422 and "not JSON" in error_of(garbled)["message"]
    assert error_of(garbled)["param"] is None


def test_refusals_in_front_of_the_routes_are_error_objects_under_v1_only(http):
    headers = {"Authorization": f"Bearer {ASKER}", "Content-Type": "application/json"}
    huge = http.post("/v1/chat/completions", content=b"x" * 4096, headers=headers)
    assert huge.status_code == 413 and "--api-max-body-kb" in error_of(huge)["message"]
    assert "--api-max-body-kb" in http.post("/api/v1/ask", content=b"x" * 4096, headers=headers).json()["detail"]

    def chunked():  # no Content-Length: the bound is found while it arrives (was 400 "error parsing the body")
        yield from (b"x" * 1000 for _ in range(10))

    for path in ("/v1/chat/completions", "/api/v1/ask"):
        sent = http.post(path, content=chunked(), headers=headers)
        assert sent.status_code == 413 and "--api-max-body-kb" in sent.text, (path, sent.text)
    foreign = http.get("/v1/models", headers={**headers, "Host": "evil.example"})
    assert foreign.status_code == 421 and "--allowed-host" in error_of(foreign)["message"]
    assert http.get("/api/v1/streams", headers={**headers, "Host": "evil.example"}).json() == {
        "error": "this page does not answer to that host name; see --allowed-host"
    }  # the guard's own, as before
    other_site = http.get("/v1/models", headers={**headers, "Origin": "http://evil.example"})
    assert other_site.status_code == 403 and error_of(other_site)["type"] == "permission_error"
    nowhere = http.get("/v1/engines", headers=headers)
    assert nowhere.status_code == 404 and error_of(nowhere)["code"] == "unknown_url"
    assert "POST /v1/chat/completions" in error_of(nowhere)["message"]
    wrong_method = http.post("/v1/models", headers=headers)
    assert wrong_method.status_code == 405 and wrong_method.headers["allow"] == "GET"
    assert http.get("/api/v1/streams/garage", headers={"Authorization": f"Bearer {READER}"}).json()["detail"]


# -- options ----------------------------------------------------------------------------------------------

TOOL = {"type": "function", "function": {"name": "open_door", "parameters": {"type": "object", "properties": {}}}}


@pytest.mark.parametrize(
    ("option", "param"),
    [
        ({"n": 2}, "n"),
        ({"tools": [TOOL]}, "tools"),
        ({"tools": [TOOL], "tool_choice": "auto"}, "tools"),
        ({"response_format": {"type": "json_object"}}, "response_format"),
        ({"logprobs": True}, "logprobs"),
        ({"logprobs": True, "top_logprobs": 2}, "logprobs"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_completion_tokens": -1}, "max_completion_tokens"),
    ],
)
def test_options_it_cannot_honour_are_refused_by_name(ai, camera, option, param):
    with pytest.raises(openai.BadRequestError) as err:
        ai.chat.completions.create(model="door", messages=ask(), **option)
    assert err.value.param == param and err.value.type == "invalid_request_error"
    assert param in err.value.message
    assert camera.asked == []  # refused before it was queued


def test_harmless_options_are_accepted(ai):
    reply = ai.chat.completions.create(
        model="door",
        messages=ask(),
        temperature=0.2,
        top_p=0.9,
        user="kitchen",
        seed=7,
        presence_penalty=0.5,
        frequency_penalty=0.5,
        stop=["\n"],
        n=1,
        logprobs=False,
        tools=[TOOL],
        tool_choice="none",
        response_format={"type": "text"},
    )
    assert reply.choices[0].message.content.startswith("A red van at the door.")


# -- max_tokens, finish_reason, usage ------------------------------------------------------------------------


def test_max_tokens_cuts_the_answer_and_finish_reason_says_length(ai):
    cut = ai.chat.completions.create(model="door", messages=ask(), max_tokens=3)
    assert cut.choices[0].finish_reason == "length"
    assert cut.choices[0].message.content == "A red van\n\nSeen at door 12-16 s (attention)"
    assert (cut.usage.prompt_tokens, cut.usage.completion_tokens, cut.usage.total_tokens) == (PROMPT_TOKENS, 3, 12)
    exact = ai.chat.completions.create(model="door", messages=ask(), max_completion_tokens=len(PIECES))
    assert exact.choices[0].finish_reason == "stop" and exact.usage.completion_tokens == len(PIECES)
    both = ai.chat.completions.create(model="door", messages=ask(), max_tokens=50, max_completion_tokens=2)
    assert both.choices[0].message.content.startswith("A red\n") and both.usage.completion_tokens == 2
    whole = ai.chat.completions.create(model="door", messages=ask())
    assert whole.choices[0].finish_reason == "stop"
    assert whole.usage.completion_tokens == len(PIECES) and whole.usage.total_tokens == PROMPT_TOKENS + len(PIECES)


def test_each_streams_answer_is_cut_when_asking_all(ai):
    reply = ai.chat.completions.create(model="all", messages=ask(), max_tokens=2)
    assert reply.choices[0].message.content == (
        "[door] A red\n[yard] A red\n\nSeen at door 12-16 s (attention), yard 12-16 s (attention)"
    )
    assert reply.choices[0].finish_reason == "length"
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (2 * PROMPT_TOKENS, 4)


def test_a_failed_answer_says_why_and_counts_what_was_sent(ai, camera):
    camera.failing = {"yard"}
    reply = ai.chat.completions.create(model="all", messages=ask())
    assert reply.choices[0].message.content.splitlines()[:2] == [
        "[door] A red van at the door.",
        "[yard] (no answer: round 1 failed)",
    ]
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (PROMPT_TOKENS, len(PIECES))
    chunks = list(ai.chat.completions.create(model="yard", messages=ask(), stream=True))
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "A red(no answer: round 1 failed)"


def test_a_streamed_answer_is_cut_and_ends_with_the_usage_chunk_when_asked(ai, http):
    chunks = list(
        ai.chat.completions.create(
            model="door", messages=ask(), stream=True, max_tokens=2, stream_options={"include_usage": True}
        )
    )
    *answer, last = chunks
    assert last.choices == [] and (last.usage.completion_tokens, last.usage.prompt_tokens) == (2, PROMPT_TOKENS)
    assert all(c.usage is None for c in answer)
    assert "".join(c.choices[0].delta.content or "" for c in answer) == "A red\n\nSeen at door 12-16 s (attention)"
    assert answer[-1].choices[0].finish_reason == "length" and answer[-1].model_extra["evidence"][0]["start"] == 12
    body = {"model": "door", "messages": ask(), "stream": True, "stream_options": {"include_usage": True}}
    raw = http.post("/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {ASKER}"})
    lines = [line for line in raw.text.splitlines() if line]
    assert lines[-1] == "data: [DONE]" and json.loads(lines[-2][6:])["usage"]["completion_tokens"] == len(PIECES)
    plain = list(ai.chat.completions.create(model="door", messages=ask(), stream=True))
    assert all(c.choices and c.usage is None for c in plain) and plain[-1].choices[0].finish_reason == "stop"


def test_no_answer_in_time_is_an_error_object_in_the_stream(ai, camera):
    camera.silent = True
    with pytest.raises(openai.APIError) as err:
        list(ai.chat.completions.create(model="door", messages=ask(), stream=True))
    assert "no answer within 0.3 s" in err.value.message and err.value.type == "timeout_error"


# -- models ---------------------------------------------------------------------------------------------------


def test_a_model_card_or_a_404_naming_the_models(ai):
    assert [m.id for m in ai.models.list()] == ["all", "door", "yard"]
    door = ai.models.retrieve("door")
    assert (door.id, door.object, door.owned_by) == ("door", "model", "edge-assistant")
    assert ai.models.retrieve("all").id == "all"
    with pytest.raises(openai.NotFoundError) as err:
        ai.models.retrieve("garage")
    assert err.value.param == "model" and "all, door, yard" in err.value.message


# -- messages -----------------------------------------------------------------------------------------------

PICTURE = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}


def test_an_image_only_question_is_refused_saying_the_camera_is_the_image(ai, camera):
    messages = [{"role": "user", "content": "Is the door open?"}, {"role": "user", "content": [PICTURE]}]
    with pytest.raises(openai.BadRequestError) as err:
        ai.chat.completions.create(model="door", messages=messages)
    assert err.value.param == "messages[1].content" and "the camera is the image" in err.value.message
    assert "send the question as text" in err.value.message
    with pytest.raises(openai.BadRequestError) as err:
        ai.chat.completions.create(model="door", messages=[{"role": "user", "content": " "}])
    assert "no text" in err.value.message and "image" not in err.value.message
    with pytest.raises(openai.BadRequestError) as err:
        ai.chat.completions.create(model="door", messages=[{"role": "system", "content": "Be brief."}])
    assert err.value.param == "messages" and "no user message" in err.value.message
    assert camera.asked == []  # the earlier text message never stood in for the question
    with_text = [{"role": "user", "content": [PICTURE, {"type": "text", "text": "And this?"}]}]
    assert ai.chat.completions.create(model="door", messages=with_text).choices[0].message.content
    assert camera.asked == ["And this?"]


def test_earlier_assistant_turns_lose_the_servers_seen_at_line(ai, camera):
    first = ai.chat.completions.create(model="all", messages=ask("What is there?")).choices[0].message.content
    assert "Seen at door 12-16 s (attention)" in first
    ai.chat.completions.create(
        model="door",
        messages=[*ask("What is there?"), {"role": "assistant", "content": first}, *ask("And now?")],
    )
    assert camera.asked[-1] == (
        "(Earlier in this conversation: user: What is there? | assistant: [door] A red van at the door. "
        "[yard] A red van at the door.)\nAnd now?"
    )
    said = "Seen at the door: a man.\n\nSeen at door 3-4 s (timeline), 7-9 s"  # the model's words stay
    ai.chat.completions.create(model="door", messages=[{"role": "assistant", "content": said}, *ask("Who?")])
    assert camera.asked[-1] == "(Earlier in this conversation: assistant: Seen at the door: a man.)\nWho?"


@pytest.mark.parametrize(
    "spans",
    [
        [EvidenceSpan(stream="door", start=0.4, end=1234.6, source="recall")],
        [EvidenceSpan(start=3, end=4, source="")],
        [EvidenceSpan(stream=f"cam_{k}-x", start=k, end=k + 2, source="timeline") for k in range(7)],
    ],
)
def test_every_seen_at_line_the_server_writes_is_found_again(spans):
    line = seen_at(spans)
    assert line.startswith("Seen at ") and without_evidence(f"It is open.\n\n{line}") == "It is open."


# -- the schema -----------------------------------------------------------------------------------------------


def test_the_schema_says_v1_refusals_are_error_objects(http):
    schema = http.get("/api/v1/openapi.json").json()
    chat = schema["paths"]["/v1/chat/completions"]["post"]["responses"]
    assert {"400", "401", "403", "404", "413", "422", "429", "504"} <= set(chat)
    for path, method in [("/v1/chat/completions", "post"), ("/v1/models", "get"), ("/v1/models/{model}", "get")]:
        for status, response in schema["paths"][path][method]["responses"].items():
            if status != "200":
                assert response["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorResponse"), path
    detail = schema["components"]["schemas"]["ErrorDetail"]
    assert set(detail["properties"]) == {"message", "type", "param", "code"}
    assert set(detail["required"]) == {"message", "type", "param", "code"}
    ask_refusal = schema["paths"]["/api/v1/ask"]["post"]["responses"]["404"]
    assert ask_refusal["content"]["application/json"]["schema"]["$ref"].endswith("/Problem")
