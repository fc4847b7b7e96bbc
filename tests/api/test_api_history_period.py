"""/api/v1/history/summary and /recap in process: the API's real routes (api.server) over a real timeline (SQLite
and PostgreSQL: the `timeline_location` fixture) written here, so every number below is arithmetic on those rows;
the refusals (422 a bad period, 404 a name never seen, 503 the timeline off or unreadable) with their messages."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from api.asking import Asks
from api.auth import Access, parse_tokens
from api.config import ApiConfig
from api.context import ApiContext
from api.feed import EventFeed
from api.server import RunningApi, api_routes, headless_app
from app.front_door import TimelineHistory
from bus import EventBus
from tests.support.api_tokens import make_token
from timeline import TimelineConfig
from timeline.store import Row, TimelineStore
from ui.guard import HostRule
from ui.login_throttle import LoginThrottle
from watches.spec import WatchSpec

READER = make_token("reader")
ASKER = make_token("asker")
HEADERS = {"Authorization": f"Bearer {READER}"}
T0 = time.time() - 3600.0  # the rows: T0 + seconds (the API's periods end at the real now)
ROUTES = ("/api/v1/history/summary", "/api/v1/history/recap")


class Cameras:
    """A stand-in for the assistant: `door` and `porch` run (`porch` has no row yet); `yard` is gone."""

    def __init__(self) -> None:
        self.bus = EventBus()
        self.streams = {"door": None, "porch": None}

    def desk_streams(self):  # the desk's streams by name (bus.desk): only names are read
        return dict.fromkeys(self.streams)


class Watches:
    """A stand-in for the runtime watches: `parcel` is configured but has never alerted."""

    configured = {"parcel": WatchSpec("parcel", "Is there a parcel?")}

    def list(self) -> list:
        return []


def alert(t: float, alert_id: str, state: str, duration: float | None = None) -> Row:
    return Row(kind="alert", t_wall=T0 + t, stream="door", start_s=t, end_s=t, question="Is a person there?",
               text=f"person {state}", who="watch", alert="person", alert_id=alert_id, state=state,
               duration_s=duration)  # fmt: skip


def answer(t: float, text: str, who: str = "standing") -> Row:
    return Row(kind="answer", t_wall=T0 + t, stream="door", start_s=t - 4, end_s=t, question="What is there?",
               text=text, who=who, round=1)  # fmt: skip


def stream_row(t: float, state: str) -> Row:
    return Row(kind="stream", t_wall=T0 + t, stream="yard", start_s=t, end_s=t, text=state, state=state)


ROWS = [
    alert(100, "p1", "begin"),
    alert(160, "p1", "end", 60.0),
    alert(300, "p2", "begin"),
    alert(310, "p2", "end", 10.0),
    answer(10, "An empty porch."),
    answer(20, "an empty porch"),
    answer(30, "An empty  porch!"),
    answer(40, "A parcel by the door.", who="person"),
    stream_row(0, "start"),
    stream_row(200, "reconnect"),
    stream_row(230, "reconnected"),
]


def client_for(history) -> TestClient:
    cameras = Cameras()
    tokens = parse_tokens(f"{READER} read reader\n{ASKER} ask phone", "test")
    feed = EventFeed(replay=10, queue=10, max_clients=2)
    context = ApiContext(cameras, Watches(), feed, Asks(cameras), Access(tokens), None, history, ApiConfig())
    app = headless_app(RunningApi(context, api_routes(context)), HostRule("127.0.0.1"), LoginThrottle())
    return TestClient(app, base_url="http://127.0.0.1")


@pytest.fixture
def http(timeline_location):
    store = TimelineStore(TimelineConfig(timeline_location))
    store.write(ROWS)
    store.close()
    with client_for(TimelineHistory(timeline_location, keep_days=1.0)) as client:
        yield client


def get(http, route: str, **params):
    return http.get(f"/api/v1/history/{route}", params=params, headers=HEADERS)


def detail(reply, status: int) -> str:
    assert reply.status_code == status, reply.text
    return reply.json()["detail"]


def test_the_summary_counts_and_times_the_rows_written(http):
    reply = get(http, "summary", since=f"{T0}", until=f"{T0 + 900}")
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert (body["since"], body["until"]) == (pytest.approx(T0), pytest.approx(T0 + 900))
    [person] = body["watches"]
    assert (person["stream"], person["watch"], person["began"]) == ("door", "person", 2)
    assert person["on_s"] == pytest.approx(70.0) and person["longest_s"] == pytest.approx(60.0)
    assert (person["first"], person["last"]) == (pytest.approx(T0 + 100), pytest.approx(T0 + 300))
    assert person["on_now"] is False
    streams = {s["stream"]: s for s in body["streams"]}
    assert (streams["door"]["answers"], streams["door"]["alerts"], streams["door"]["down_s"]) == (4, 2, 0.0)
    assert streams["yard"]["down_s"] == pytest.approx(30.0)
    [gap] = streams["yard"]["gaps"]
    assert (gap["start"], gap["end"], gap["reason"]) == (pytest.approx(T0 + 200), pytest.approx(T0 + 230), "reconnect")


def test_the_summary_of_one_watch_per_hour_and_from_an_age(http):
    hourly = get(http, "summary", since="2h", watch="person", bucket="hour").json()
    assert hourly["bucket"] == "hour" and hourly["streams"] == []  # one watch: no stream totals
    [person] = hourly["watches"]
    assert sum(b["began"] for b in person["buckets"]) == 2
    assert sum(b["on_s"] for b in person["buckets"]) == pytest.approx(70.0)
    later = get(http, "summary", since=f"{T0 + 200}", stream="door").json()  # until: now
    [person] = later["watches"]
    assert person["began"] == 1 and person["on_s"] == pytest.approx(10.0)


def test_the_recap_cites_its_moments_and_collapses_equal_answers(http):
    body = get(http, "recap", since=f"{T0}", until=f"{T0 + 900}", stream="door").json()
    kinds = [(line["kind"], line["count"]) for line in body["lines"]]
    assert kinds == [("answers", 3), ("asked", 1), ("alert", 1), ("alert", 1)]
    run = body["lines"][0]
    assert len(run["moments"]) == 2 and run["moments"][0] < run["moments"][1]
    assert "2 alert(s), 4 answer(s), 0 gap(s)" in body["message"] and body["left_out"] == 0
    newest = get(http, "recap", since=f"{T0}", until=f"{T0 + 900}", lines=1, thumbnails=0).json()
    assert len(newest["lines"]) == 1 and newest["left_out"] == 4  # 3 door lines, 2 alerts, the yard's gap: 5


def test_an_empty_period_is_an_answer_not_a_refusal(http):
    reply = get(http, "recap", since=f"{T0 - 3000}", until=f"{T0 - 2000}", stream="door")
    assert reply.status_code == 200 and reply.json()["lines"] == []
    assert reply.json()["message"].startswith("Nothing in the timeline from ")
    summary = get(http, "summary", since=f"{T0 - 3000}", until=f"{T0 - 2000}").json()
    assert summary["watches"] == [] and summary["streams"] == []


@pytest.mark.parametrize("route", ["summary", "recap"])
@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"since": "yesterday"}, "invalid time 'yesterday': expected an age"),
        ({"until": "2026-13-45"}, "invalid time '2026-13-45'"),
        ({"since": "1h", "until": "2h"}, "ends before it starts"),
        ({"since": f"{time.time() + 3600}"}, "starts in the future"),
        ({"since": "3d"}, "the timeline keeps 1 days (--timeline-days)"),
    ],
)
def test_a_bad_period_is_422_with_why(http, route, params, words):
    assert words in detail(get(http, route, **params), 422)


@pytest.mark.parametrize(
    ("route", "params", "where"),
    [
        ("recap", {"lines": 0}, "lines"),
        ("recap", {"lines": 201}, "lines"),
        ("recap", {"thumbnails": 21}, "thumbnails"),
        ("summary", {"bucket": "week"}, "bucket"),
        ("summary", {"since": "1" * 41}, "since"),
    ],
)
def test_values_outside_the_schema_are_fastapis_422(http, route, params, where):
    [problem] = detail(get(http, route, **params), 422)
    assert problem["loc"] == ["query", where]


@pytest.mark.parametrize("route", ["summary", "recap"])
def test_a_name_never_seen_nor_running_is_404_listing_those_there_are(http, route):
    stream = detail(get(http, route, stream="garage"), 404)
    assert stream == "no stream named 'garage', now or in the timeline; streams: door, porch, yard"
    watch = detail(get(http, route, watch="fox"), 404)
    assert watch == "no watch named 'fox' now or in the timeline; watches: parcel, person"
    on_yard = detail(get(http, route, stream="yard", watch="person"), 404)
    assert "of stream 'yard'" in on_yard and on_yard.endswith("watches: parcel")
    for known in ({"stream": "porch"}, {"watch": "parcel"}, {"stream": "yard", "since": "10m"}):
        assert get(http, route, **known).status_code == 200, known  # running, or seen: nothing happened


def test_the_timeline_off_or_unreadable_is_503_saying_what_to_turn_on(tmp_path):
    with client_for(None) as off:
        for route in ROUTES:
            message = detail(off.get(route, headers=HEADERS), 503)
            assert message.startswith('the timeline is off (--timeline ""): start the assistant with --timeline')
    with client_for(TimelineHistory(tmp_path / "missing.sqlite")) as missing:
        for route in ROUTES:
            assert "missing.sqlite" in detail(missing.get(route, headers=HEADERS), 503)


def test_without_keep_days_a_period_may_reach_back_as_far_as_asked(tmp_path):
    store = TimelineStore(TimelineConfig(tmp_path / "t.sqlite"))
    store.write(ROWS)
    store.close()
    with client_for(TimelineHistory(tmp_path / "t.sqlite")) as http:
        assert get(http, "summary", since="30d").status_code == 200


def test_both_routes_need_the_read_scope_and_are_in_the_schema(http):
    for route in ROUTES:
        assert http.get(route).status_code == 401
        refused = http.get(route, headers={"Authorization": f"Bearer {ASKER}"})
        assert "needs the scope 'read'" in detail(refused, 403)
    schema = http.get("/api/v1/openapi.json").json()
    for route, model in zip(ROUTES, ("Summary", "Recap"), strict=True):
        operation = schema["paths"][route]["get"]
        assert operation["security"] == [{"HTTPBearer": []}]
        ok = operation["responses"]["200"]["content"]["application/json"]["schema"]
        assert ok["$ref"].endswith(f"/{model}")
        assert operation["responses"]["422"]["content"]["application/json"]["schema"]["$ref"].endswith("/Invalid")
        assert {"401", "403", "404", "503"} <= set(operation["responses"])
    assert {"since", "until", "stream", "watch", "bucket"} == {
        p["name"] for p in schema["paths"][ROUTES[0]]["get"]["parameters"]
    }
    assert {"lines", "thumbnails"} <= {p["name"] for p in schema["paths"][ROUTES[1]]["get"]["parameters"]}
    watch = schema["components"]["schemas"]["WatchSummary"]["properties"]
    assert {"began", "on_s", "longest_s", "first", "last", "on_now", "buckets"} <= set(watch)


def test_the_thumbnail_route_still_answers_next_to_them(http):
    reply = http.get("/api/v1/history/1/thumbnail", headers=HEADERS)
    assert reply.status_code == 404 and reply.json()["detail"] == "no thumbnail for moment 1"
