"""/api/v1's requests as the schema says them, in process: the API's real routes and validation over stand-ins
(no model). Unknown watch keys and MQTT's spellings, the 422 body as the schema documents it, ids that cannot
exist, history of a stream that is gone. The same routes over a real server: tests/api/test_api_server.py."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from api.asking import Asks
from api.auth import Access, parse_tokens
from api.config import ApiConfig
from api.context import ApiContext
from api.feed import EventFeed
from api.server import RunningApi, api_routes, headless_app
from bus import EventBus
from bus.names import NAME_PATTERN
from tests.support.api_tokens import make_token
from timeline.reader import Moment
from ui.guard import HostRule
from ui.login_throttle import LoginThrottle
from watches.runtime import MAX_EVERY_S, MAX_EXPIRY_S, MIN_EVERY_S

ADMIN = make_token("admin")
HEADERS = {"Authorization": f"Bearer {ADMIN}"}


class Cameras:
    """A stand-in for the assistant: two streams; nothing here is ever asked of it."""

    def __init__(self) -> None:
        self.bus = EventBus()
        self.streams = {"door": None, "yard": None}

    def desk_streams(self):  # the desk's streams by name (bus.desk): only names are read
        return dict.fromkeys(self.streams)


class Timeline:
    """A stand-in for the timeline: one moment of `gone`, a stream that no longer runs; no thumbnails."""

    GONE = Moment(7, "answer", "gone", 1.0, 0.0, 4.0, "What is there?", "a van", None, None, None, None, False)

    def search(self, text, since_s, stream, limit):
        moments = [self.GONE] if stream in (None, "gone") and text in (None, "van") else []
        return moments[:limit]

    def thumbnail(self, row_id):
        assert 1 <= row_id < 2**63, "an id the timeline cannot hold reached it"
        return None


@pytest.fixture
def http():
    cameras = Cameras()
    tokens = parse_tokens(f"{ADMIN} read,ask,manage admin", "test")
    feed = EventFeed(replay=10, queue=10, max_clients=2)
    context = ApiContext(cameras, None, feed, Asks(cameras), Access(tokens), None, Timeline(), ApiConfig())
    app = headless_app(RunningApi(context, api_routes(context)), HostRule("127.0.0.1"), LoginThrottle())
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield client


@pytest.fixture
def schema(http):
    return http.get("/api/v1/openapi.json").json()


def problems(reply) -> list[dict]:
    """The 422's `detail` as FastAPI's list of problems (what the schema's ValidationProblem says)."""
    assert reply.status_code == 422, reply.text
    detail = reply.json()["detail"]
    assert isinstance(detail, list) and detail, detail
    return detail


# -- watches: one set of keys, MQTT's spellings as aliases -------------------------------------------------


@pytest.mark.parametrize(("method", "path"), [("POST", "/api/v1/watches"), ("PATCH", "/api/v1/watches/parcel")])
def test_unknown_watch_keys_are_refused_naming_them_and_the_allowed_ones(http, method, path):
    body = {"question": "Is there a parcel?", "strem": "door", "evry": 5}
    [problem] = problems(http.request(method, path, json=body, headers=HEADERS))
    assert "unknown key(s) evry, strem" in problem["msg"]
    allowed = problem["msg"].split("allowed: ")[1].split(", ")
    assert {"question", "streams", "every", "threshold", "expires_in_s", "stream", "every_s"} <= set(allowed)


@pytest.mark.parametrize(
    "body",
    [
        {"question": "q?", "stream": "door", "streams": ["door"]},
        {"question": "q?", "every_s": 5, "every": 5},
    ],
)
def test_a_setting_given_in_both_spellings_is_refused(http, body):
    [problem] = problems(http.post("/api/v1/watches", json=body, headers=HEADERS))
    assert "not both" in problem["msg"]


def test_mqtt_spellings_are_checked_as_the_settings_they_stand_for(http):
    """`stream` is one name (a list is refused), `every_s` a number: they become `streams` and `every`."""
    [listed] = problems(http.post("/api/v1/watches", json={"question": "q?", "stream": ["door"]}, headers=HEADERS))
    assert listed["loc"][:2] == ["body", "streams"]
    [often] = problems(http.post("/api/v1/watches", json={"question": "q?", "every_s": "often"}, headers=HEADERS))
    assert often["loc"] == ["body", "every"]


# -- the schema says what the server enforces and what it sends ----------------------------------------------


def test_the_watch_request_schema_gives_the_ranges_the_watches_enforce(schema):
    for name in ("WatchAdd", "WatchChange"):
        model = schema["components"]["schemas"][name]
        props = model["properties"]
        assert model["additionalProperties"] is False, name
        assert (props["threshold"]["minimum"], props["threshold"]["maximum"]) == (0, 1), name
        assert (props["every"]["minimum"], props["every"]["maximum"]) == (MIN_EVERY_S, MAX_EVERY_S), name
        assert props["every"]["minimum"] > 0
        assert props["expires_in_s"]["exclusiveMinimum"] == 0, name
        assert props["expires_in_s"]["maximum"] == MAX_EXPIRY_S, name
        assert props["on_after"]["minimum"] == 1 and props["cooldown"]["minimum"] == 0, name
        assert "stream" in props["streams"]["description"] and "every_s" in props["every"]["description"]


def test_every_422_under_api_v1_is_documented_as_what_is_sent(http, schema):
    components = schema["components"]["schemas"]
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            refused = operation["responses"].get("422")
            if path.startswith("/api/v1/") and refused:
                assert refused["content"]["application/json"]["schema"]["$ref"].endswith("/Invalid"), (method, path)
    shapes = components["Invalid"]["properties"]["detail"]["anyOf"]
    assert {"type": "string"} in shapes
    [listed] = [s for s in shapes if s.get("type") == "array"]
    problem = components[listed["items"]["$ref"].rsplit("/", 1)[1]]
    sent = [
        http.post("/api/v1/watches", json={"question": "q?", "every_s": 1, "every": 1}, headers=HEADERS),
        http.post("/api/v1/watches", content=b"{not json", headers={**HEADERS, "Content-Type": "application/json"}),
        http.post("/api/v1/watches", json={"threshold": "high"}, headers=HEADERS),
        http.get("/api/v1/history", params={"limit": 0}, headers=HEADERS),
    ]
    for reply in sent:
        for each in problems(reply):
            assert set(problem["required"]) <= set(each) <= set(problem["properties"]), each
    sentence = http.get("/api/v1/events", headers={**HEADERS, "Last-Event-ID": "abc"})
    assert sentence.status_code == 422 and isinstance(sentence.json()["detail"], str)


# -- ids that cannot exist; history of streams that do not -----------------------------------------------------


@pytest.mark.parametrize("row_id", [str(2**63), str(2**64 + 1), "9" * 4000, "0", "-1"])
def test_a_thumbnail_id_the_timeline_cannot_hold_is_404(http, row_id):
    reply = http.get(f"/api/v1/history/{row_id}/thumbnail", headers=HEADERS)
    assert reply.status_code == 404, reply.text[:300]
    assert "ids are 1 to" in reply.json()["detail"]


def test_a_thumbnail_id_too_long_to_be_a_number_is_422(http):
    [problem] = problems(http.get(f"/api/v1/history/{'9' * 5000}/thumbnail", headers=HEADERS))
    assert problem["loc"] == ["path", "row_id"] and problem["type"] == "int_parsing_size"


@pytest.mark.parametrize("last", ["9" * 5000, "\u00b2".encode("latin-1"), "1.5", "-3"])
def test_a_last_event_id_the_feed_never_sent_is_422(http, last):
    reply = http.get("/api/v1/events", headers={**HEADERS, "Last-Event-ID": last})
    assert reply.status_code == 422, reply.text[:300]
    assert "Last-Event-ID" in reply.json()["detail"] and len(reply.text) < 300


def test_history_of_a_stream_never_seen_is_404_and_of_a_stream_gone_is_kept(http):
    unknown = http.get("/api/v1/history", params={"stream": "nope"}, headers=HEADERS)
    assert unknown.status_code == 404
    assert "'nope'" in unknown.json()["detail"] and "door, yard" in unknown.json()["detail"]
    gone = http.get("/api/v1/history", params={"stream": "gone"}, headers=HEADERS)
    assert gone.status_code == 200 and [m["id"] for m in gone.json()] == [7]
    no_match = http.get("/api/v1/history", params={"stream": "gone", "text": "bicycle"}, headers=HEADERS)
    assert no_match.status_code == 200 and no_match.json() == []
    running = http.get("/api/v1/history", params={"stream": "door", "text": "bicycle"}, headers=HEADERS)
    assert running.status_code == 200 and running.json() == []


# -- what schemathesis found (scripts/check_clients.py runs it over the whole schema) -----------------------


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/api/v1/watches", "GET, POST"),
        ("/api/v1/watches/parcel", "DELETE, GET, PATCH"),
        ("/api/v1/streams", "GET, POST"),
    ],
)
def test_a_method_a_path_does_not_take_is_405_naming_every_method_it_does(http, path, allowed):
    # Starlette's own 405 named only the first route of the path: `Allow: GET` where POST is served too.
    reply = http.request("OPTIONS", path, headers=HEADERS)
    assert reply.status_code == 405 and reply.headers["allow"] == allowed, (reply.status_code, reply.headers)
    assert allowed in reply.json()["detail"]
    unknown = http.get("/api/v1/nothing-here", headers=HEADERS)
    assert unknown.status_code == 404 and "/api/v1/watches" in unknown.json()["detail"]


def test_the_schema_says_what_the_server_checks_itself(schema):
    """What the routes refuse with their own sentence is in the schema too, so a generated valid request is valid:
    a question is not blank, watched streams are names (one at least), event types are known, a body that is not
    JSON is 400, and `streaming` is a boolean, not 0 or 1."""
    parts = schema["components"]["schemas"]
    assert parts["AskRequest"]["properties"]["question"]["pattern"] == r"\S"
    assert parts["WatchAdd"]["properties"]["streams"]["minItems"] == 1
    assert parts["WatchAdd"]["properties"]["streams"]["items"]["pattern"] == NAME_PATTERN.pattern
    events = {p["name"]: p["schema"] for p in schema["paths"]["/api/v1/events"]["get"]["parameters"]}
    assert re.search(events["types"]["pattern"], "alert, answer") and not re.search(events["types"]["pattern"], "À")
    assert events["last-event-id"]["type"] == "string"  # no null: a header has no null
    for path, method in (("/api/v1/ask", "post"), ("/api/v1/watches", "post"), ("/api/v1/streams", "post")):
        assert "400" in schema["paths"][path][method]["responses"], path


def test_streaming_must_be_a_boolean(http):
    reply = http.post("/api/v1/ask", json={"question": "What is there?", "streaming": 0}, headers=HEADERS)
    assert reply.status_code == 422 and problems(reply)[0]["loc"][-1] == "streaming"
