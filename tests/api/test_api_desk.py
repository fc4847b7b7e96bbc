"""The desk (bus.desk): one box's assistant and the fleet's (on the head) both satisfy it, and a route written
once against it (GET /api/v1/streams, the 404 of an unknown stream) answers the same shape on both. The one box is
a real `Assistant` of two tiny-model streams (not started: nothing is asked of the model); the fleet a real
`FleetAssistant` over a stand-in coordinator holding one placed and one waiting stream (the cluster itself is
tested in tests/fleet/)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient

from api.asking import Asks
from api.auth import Access, parse_tokens
from api.config import ApiConfig
from api.context import ApiContext
from api.feed import EventFeed
from api.server import RunningApi, api_routes, headless_app
from app.assistant import Assistant, RunLimits
from app.commands import RunCommands
from app.config import StreamConfig
from app.stream import Stream
from bus import EventBus
from bus.desk import Desk, DeskStream
from bus.input_limits import InputLimits
from cache.config import CacheConfig
from capture import CaptureConfig
from fleet.api_assistant import WAITING, FleetAssistant
from model.session import SessionConfig, StreamingSession
from outputs.commands import NOT_FOUND, CommandError
from tests.support.api_tokens import make_token
from tests.support.session_helpers import loaded
from ui.guard import HostRule
from ui.login_throttle import LoginThrottle
from watches.runtime import RuntimeWatches
from watches.scheduler import StandingQuestion

ADMIN = make_token("admin")
HEADERS = {"Authorization": f"Bearer {ADMIN}"}
SOURCE = "rtsp://user:secret@192.168.1.20/stream"


def one_box() -> Assistant:
    model = loaded("tiny-qwen2-vl")
    streams = [
        Stream(name, StreamingSession(model, CacheConfig(budget=64, window=8), SessionConfig(max_new_tokens=2)),
               StandingQuestion(every_s=0.0))
        for name in ("door", "yard")
    ]  # fmt: skip
    return Assistant(streams, EventBus(), RunLimits())


def fleet() -> FleetAssistant:
    schedule = StandingQuestion(every_s=0.0)
    streams = {
        name: StreamConfig(name, CaptureConfig(SOURCE if name == "door" else "rtsp://192.168.1.21/s"), schedule)
        for name in ("door", "yard")
    }
    coordinator = SimpleNamespace(
        streams=streams, owner={"door": "a-1"}, waiting={"yard"}, runtime_watches=[],
        config=SimpleNamespace(input_limits=InputLimits(), watches=[], schedule=schedule),
        tracking=SimpleNamespace(rounds=3, stream_time={"door": 4.0}),
    )  # fmt: skip
    return FleetAssistant(coordinator, EventBus())


@pytest.fixture(params=["one box", "fleet"])
def desk(request) -> Desk:
    return one_box() if request.param == "one box" else fleet()


def client(desk: Desk) -> TestClient:
    context = ApiContext(
        desk, None, EventFeed(), Asks(desk), Access(parse_tokens(f"{ADMIN} read admin", "t")), None, None, ApiConfig()
    )
    app = headless_app(RunningApi(context, api_routes(context)), HostRule("127.0.0.1"), LoginThrottle())
    return TestClient(app, base_url="http://127.0.0.1")


def test_both_assistants_are_desks_and_see_their_streams_as_frozen_views(desk):
    assert isinstance(desk, Desk)
    seen = desk.desk_streams()
    assert list(seen) == ["door", "yard"] and all(isinstance(s, DeskStream) for s in seen.values())
    with pytest.raises(AttributeError):
        seen["door"].state = "changed"  # a copy: a door cannot change (or reach into) the stream
    assert desk.check_question("  What is there?  ") == "What is there?"
    with pytest.raises(ValueError):
        desk.check_question("   ")


def test_a_route_written_once_answers_on_both(desk):
    with client(desk) as http:
        listed = http.get("/api/v1/streams", headers=HEADERS)
        missing = http.get("/api/v1/streams/porch", headers=HEADERS)
    assert listed.status_code == 200, listed.text
    views = {view["name"]: view for view in listed.json()}
    assert list(views) == ["door", "yard"]
    assert set(views["door"]) == {"name", "state", "source", "stream_time", "clips", "answers", "lag_s", "watches",
                                  "default", "host"}  # fmt: skip
    assert missing.status_code == 404 and "door, yard" in missing.json()["detail"]
    if isinstance(desk, Assistant):  # one box: the first stream is the default, no host; no source yet
        assert views["door"]["default"] and not views["yard"]["default"]
        assert views["door"]["host"] is None and views["door"]["source"] is None
    else:  # the fleet: the placed stream's host, the other waiting; the source without its password
        assert views["door"]["host"] == "a-1" and views["yard"]["state"] == WAITING
        assert "secret" not in views["door"]["source"] and "192.168.1.20" in views["door"]["source"]
        assert not any(view["default"] for view in views.values())


def test_each_desk_says_what_it_can_do_and_refuses_the_rest_with_the_reason(desk):
    """The page's commands are written once against the desk: what a fleet cannot do (its streams' caches live on
    their hosts) is refused with a reason, and its abilities say so, which the page reads to leave those out."""
    if isinstance(desk, Assistant):
        assert desk.abilities.in_place and desk.abilities.local_sources and desk.abilities.standing_question
        desk.reset("yard")  # queued for the model worker
        return
    assert not (desk.abilities.in_place or desk.abilities.local_sources or desk.abilities.standing_question)
    for refused in (lambda: desk.reset("door"), lambda: desk.stop_stream("door")):
        with pytest.raises(ValueError, match="its cache lives on its host"):
            refused()
    with pytest.raises(ValueError, match="network streams only"):
        desk.add_stream("porch", CaptureConfig("/videos/porch.mp4"))
    with pytest.raises(ValueError, match="standing question"):
        desk.schedule.update(question="Anyone?")
    assert desk.stream_time == 4.0  # the first stream's time as its host reported it


def test_mqtt_commands_written_once_answer_on_both(desk):
    """MQTT's commands (app/commands.py, bound by either launcher) take the desk: the same refusal of an unknown
    stream, a question queued for its stream, a watch set on the run's runtime watches and owned by "mqtt". On
    the fleet the question goes to the coordinator (the stream's host) and the watch to every host."""
    asked, applied = [], []
    if isinstance(desk, FleetAssistant):

        def ask(question, stream, request=None):
            asked.append((question, stream, request))
            return [stream]

        def set_runtime_watches(specs, reasons, owners):
            applied.append({spec.name: owners[spec.name] for spec in specs})

        desk.coordinator.ask, desk.coordinator.set_runtime_watches = ask, set_runtime_watches
    commands = RunCommands(desk, RuntimeWatches(desk))
    with pytest.raises(CommandError) as refused:
        commands.ask("Anyone?", "porch", "r-1")
    assert refused.value.code == NOT_FOUND and "door, yard" in str(refused.value)
    assert commands.ask("Anyone at the door?", "door", "r-2") == ["door"]
    added = commands.watch({"action": "add", "name": "person", "question": "Is there a person?", "stream": "door"})
    assert added["watch"]["owner"] == "mqtt" and added["watch"]["streams"] == ["door"]
    assert [watch["name"] for watch in commands.watch({"action": "list"})["watches"]] == ["person"]
    if isinstance(desk, FleetAssistant):
        assert asked == [("Anyone at the door?", "door", "r-2")]
        assert applied[-1] == {"person": "mqtt"}
