"""The fleet as the HTTP API sees it (fleet/api_assistant.py), without a cluster: each stream's view (its host,
or waiting; its clips, answers and watches from the hosts' events), questions routed with the API request's id,
runtime watches sent to every ready host (newest set wins on the host) and to a host with each stream it starts,
`--api --ray` accepted. The real routing through Ray is tests/fleet/test_fleet_api.py."""

from __future__ import annotations

import pytest

from app.cli import parse_args
from app.config import AppConfig
from bus import Answer, ClipEvent, EventBus
from bus.stats import AnswerStats
from capture.options import CaptureOptions
from fleet.api_assistant import WAITING, FleetAssistant
from tests.fleet.test_fleet_page_commands import RemoteCall, fleet
from tests.support.app_helpers import video
from watches.runtime import RuntimeWatches
from watches.spec import WatchSpec


def watched_fleet(tmp_path):
    """The page's test fleet (a on host h1, b waiting) whose host also takes watches and stream starts."""
    coordinator, actor = fleet(tmp_path)
    actor.set_runtime_watches = RemoteCall(actor.calls, "set_runtime_watches")
    actor.start_stream = RemoteCall(actor.calls, "start_stream")
    return coordinator, actor


def test_api_with_ray_is_accepted_and_needs_no_stream_to_start_with():
    config = AppConfig.from_args(parse_args(["--ray", "auto", "--api", "--model", "tiny", "--timeline", ""]))
    assert config.api.headless and config.fleet is not None and config.streams == []


def test_each_stream_is_seen_with_its_host_or_waiting_and_what_its_host_said(tmp_path):
    coordinator, _ = watched_fleet(tmp_path)
    bus = EventBus()
    assistant = FleetAssistant(coordinator, bus)
    bus.publish(ClipEvent(stream="a", index=0, stream_time=4.0, lag_s=0.25))
    bus.publish(Answer(stream="a", stats=AnswerStats(round=1, question="q?", answer="yes"), stream_time=4.0))
    views = assistant.desk_streams()
    assert list(views) == ["a", "b"]
    a, b = views["a"], views["b"]
    assert (a.host, a.state, a.clips, a.answers, a.stream_time, a.lag_s) == ("h1", "watching", 1, 1, 4.0, 0.25)
    assert (b.host, b.state, b.clips) == (None, WAITING, 0)
    assert "file" in a.source and not a.first and assistant.rounds == 0
    assistant.close()
    bus.publish(ClipEvent(stream="a", index=1, stream_time=8.0))
    assert assistant.desk_streams()["a"].clips == 1  # unsubscribed


def test_a_question_carries_its_request_id_to_the_streams_host(tmp_path):
    coordinator, actor = watched_fleet(tmp_path)
    assistant = FleetAssistant(coordinator, EventBus())
    assert assistant.ask("what is at the door?", "a", request="r1") == ["a"]
    assert actor.calls == [("ask", "what is at the door?", "a", "r1")]
    with pytest.raises(ValueError, match="has no host now"):
        assistant.ask("and b?", "b", request="r2")


def test_runtime_watches_go_to_every_ready_host_and_with_each_stream_started(tmp_path):
    coordinator, actor = watched_fleet(tmp_path)
    assistant = FleetAssistant(coordinator, EventBus())
    registry = RuntimeWatches(assistant)
    watch = registry.add({"name": "red", "question": "Is it red?", "streams": ["a"], "every": 2}, owner="phone")
    ((name, specs, reasons, version, owners),) = actor.calls
    assert (name, specs, reasons, version, owners) == ("set_runtime_watches", (watch.spec,), {}, 1, {"red": "phone"})
    assert assistant.desk_streams()["a"].watches == ("red",)
    assert assistant.desk_streams()["b"].watches == ()
    registry.remove("red")
    assert actor.calls[-1] == ("set_runtime_watches", (), {"red": "removed"}, 2, {})
    with pytest.raises(ValueError, match="unknown stream"):
        registry.add({"question": "q?", "streams": ["garage"]})
    spec = WatchSpec(name="blue", question="Is it blue?")
    coordinator.set_runtime_watches([spec])
    actor.calls.clear()
    coordinator._start_on("b", coordinator.hosts["h1"])  # b placed: the host gets the watches before the stream
    assert [call[0] for call in actor.calls] == ["set_runtime_watches", "start_stream"]
    assert actor.calls[0][1:] == ((spec,), {}, 3, {})


def test_streams_are_added_as_on_the_fleets_page(tmp_path):
    coordinator, _ = watched_fleet(tmp_path)
    assistant = FleetAssistant(coordinator, EventBus())
    options = CaptureOptions(**coordinator.config.capture_settings)
    assert "placed" in assistant.add_stream("gate", options.config("rtsp://camera.example/gate"))
    assert assistant.desk_streams()["gate"].state == WAITING
    with pytest.raises(ValueError, match="network streams only"):
        assistant.add_stream("yard", options.config(str(video(4))))
    assistant.remove_stream("gate")
    assert "gate" not in assistant.desk_streams()
