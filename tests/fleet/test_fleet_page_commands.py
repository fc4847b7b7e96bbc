"""The page's commands on a fleet (fleet/page_commands.py), without a cluster: questions routed by the
coordinator to the stream's host, streams added (network sources only) and removed, and what the fleet cannot do
yet (switch a source in place, stop, reset, change the standing question) refused with a message the page shows,
the fleet unchanged, and left off the fleet's page; a question to every stream marks the turn of a stream without
a host as not asked. The real routing through Ray is tests/fleet/test_ui_browser_fleet.py."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from app.__main__ import main
from app.assistant import Assistant
from app.cli import parse_args
from app.config import AppConfig
from bus import EventBus
from capture.options import CaptureOptions
from fleet.api_assistant import FleetAssistant
from fleet.coordinator import Coordinator
from fleet.hosts import HostHandle
from fleet.nodes import NodeSlots
from fleet.page_commands import FleetCommands
from tests.support.app_helpers import video
from tests.support.mqtt_broker import free_port
from ui import render
from ui.controls import ALL_STREAMS, NOT_ASKED, Controls, Feedback
from ui.page import build_page
from ui.preview_files import PreviewFiles
from ui.state import LiveState

KEY = "the-fleets-key"  # what the head hands its hosts with every call (fleet/host_access.py)


class RemoteCall:
    def __init__(self, calls: list, name: str) -> None:
        self.calls, self.name = calls, name

    def remote(self, key, *args):
        assert key == KEY, f"{self.name} called without the fleet's key"
        self.calls.append((self.name, *args))
        return len(self.calls)


class FakeActor:
    """A host actor as the coordinator calls it: each call recorded (after its key), its ref a number."""

    def __init__(self) -> None:
        self.calls: list = []
        self.ask = RemoteCall(self.calls, "ask")
        self.remove_stream = RemoteCall(self.calls, "remove_stream")


class Refused(Exception):
    pass


def fake_ray(refuse: bool = False) -> SimpleNamespace:
    """What the coordinator uses of `ray` to route a question: get (the host took it, or refused it) and errors."""

    def get(ref, timeout=None):
        if refuse:
            raise Refused("busy: 4 questions are already waiting for the model; ask again in a moment")
        return None

    errors = SimpleNamespace(RayActorError=ConnectionError, GetTimeoutError=TimeoutError, RayTaskError=Refused)
    return SimpleNamespace(get=get, exceptions=errors)


def fleet(tmp_path, refuse: bool = False) -> tuple[Coordinator, FakeActor]:
    """A coordinator of streams a and b with one host `h1` running a; b waits (no room)."""
    clip = str(video(4))
    args = parse_args(
        ["--ray", "127.0.0.1:6379", "--ui", "--model", "tiny", "--stream", f"a={clip}", "--stream", f"b={clip}"]
        + ["--timeline", "", "--question", "what happens?", "--every", "8"]
    )
    config = AppConfig.from_args(args)
    coordinator = Coordinator(config, config.fleet, EventBus(), fake_ray(refuse))
    actor = FakeActor()
    node = NodeSlots("n1" * 8, "127.0.0.1", "box", "a", 1, 0.0)
    coordinator.hosts["h1"] = HostHandle("h1", node, actor, time.monotonic(), key=KEY, ready=True, streams={"a"})
    coordinator.owner["a"] = "h1"
    coordinator.waiting["b"] = ("no host in the fleet has room for one more stream", time.monotonic())
    return coordinator, actor


def test_the_page_and_a_fleet_are_allowed_together_and_need_a_stream_to_start_with():
    args = parse_args(["--ray", "auto", "--ui", "--model", "tiny", "--stream", f"a={video(4)}", "--timeline", ""])
    config = AppConfig.from_args(args)
    assert config.ui is not None and config.fleet is not None and config.fleet.address == "auto"
    with pytest.raises(ValueError, match="at least one with --stream"):
        AppConfig.from_args(parse_args(["--ray", "auto", "--ui", "--model", "tiny", "--timeline", ""]))


def test_questions_are_routed_to_the_streams_host_and_refused_with_the_reason(tmp_path):
    coordinator, actor = fleet(tmp_path)
    commands = FleetCommands(coordinator)
    assert commands.ask("what is at the door?", "a") == ["a"]
    assert commands.ask("anything new?", None) == ["a"]  # every host, for all of its streams; b has none
    assert actor.calls == [("ask", "what is at the door?", "a"), ("ask", "anything new?", None)]
    with pytest.raises(ValueError, match=r"stream 'b' has no host now \(no host in the fleet has room"):
        commands.ask("and b?", "b")
    with pytest.raises(ValueError, match="no stream named 'c'"):
        commands.ask("and c?", "c")
    with pytest.raises(ValueError, match="--max-question-chars"):
        commands.check_question("x" * 100_000)
    assert len(actor.calls) == 2
    busy, _ = fleet(tmp_path, refuse=True)
    with pytest.raises(ValueError, match="^busy: 4 questions"):  # the host's own words, not Ray's traceback
        FleetCommands(busy).ask("what now?", "a")
    coordinator.hosts.clear()
    coordinator.owner.clear()
    with pytest.raises(ValueError, match="no stream runs on a host now"):
        commands.ask("anyone?", None)


def test_streams_are_added_by_network_sources_only_and_removed(tmp_path):
    coordinator, actor = fleet(tmp_path)
    commands = FleetCommands(coordinator)
    options = CaptureOptions(**coordinator.config.capture_settings)
    admission = commands.add_stream("gate", options.config("rtsp://camera.example/gate"))
    assert "placed" in admission and coordinator.streams["gate"].capture.source == "rtsp://camera.example/gate"
    assert "gate" in coordinator.waiting and coordinator.streams["gate"].schedule.question == "what happens?"
    with pytest.raises(ValueError, match="network streams only"):
        commands.add_stream("yard", options.config(str(video(4))))
    with pytest.raises(ValueError, match="exists already"):
        commands.add_stream("gate", options.config("rtsp://camera.example/other"))
    with pytest.raises(ValueError, match="bad stream name"):
        commands.add_stream("Bad Name", options.config("rtsp://camera.example/x"))
    assert set(commands.streams) == {"a", "b", "gate"}
    commands.remove_stream("a")
    assert actor.calls == [("remove_stream", "a")] and "a" not in coordinator.owner
    with pytest.raises(ValueError, match="no stream named 'nope'"):
        commands.remove_stream("nope")
    assert set(commands.streams) == {"b", "gate"}


def test_what_the_fleet_cannot_do_yet_is_refused_on_the_page_and_changes_nothing(tmp_path):
    coordinator, actor = fleet(tmp_path)
    commands = FleetCommands(coordinator)
    live = LiveState(streams=("a", "b"))
    controls = Controls(commands, live, CaptureOptions(), max_upload_bytes=2**20, streams=("a", "b"))
    refusals = {
        "switch a stream's source in place": controls.start("path or URL", None, "rtsp://camera.example/x", 0, "b"),
        "stop a stream in place": controls.stop("a"),
        "reset a stream's memory": controls.reset("b"),
        "change the standing question": controls.set_standing("what is new?", 4.0),
    }
    for what, feedback in refusals.items():
        assert not feedback.ok and f"the fleet cannot {what} yet" in feedback.message, feedback
    assert commands.schedule.question == "what happens?" and commands.schedule.every_s == 8.0
    assert actor.calls == [] and set(coordinator.streams) == {"a", "b"} and coordinator.owner == {"a": "h1"}
    assert [line.message for line in live.snapshot().log] == [f.message for f in refusals.values()]
    assert controls.ask("what is at the door?", "a").ok and actor.calls == [("ask", "what is at the door?", "a")]


def test_a_question_to_every_stream_marks_the_turn_of_a_stream_without_a_host_as_not_asked(tmp_path):
    coordinator, actor = fleet(tmp_path)
    live = LiveState(streams=("a", "b"))
    controls = Controls(FleetCommands(coordinator), live, CaptureOptions(), max_upload_bytes=2**20)
    feedback = controls.ask("anything new?", ALL_STREAMS)
    assert feedback.ok and feedback.message == "not asked: b (no host then)"
    assert actor.calls == [("ask", "anything new?", None)]  # a's host, for a
    turns = {turn.stream: turn for turn in live.snapshot().turns}
    assert turns["a"].queued and turns["a"].error is None  # its answer fills it
    assert not turns["b"].queued and turns["b"].done and turns["b"].error == NOT_ASKED
    body = render.turn_messages(turns["b"], label=True)[1]["content"]
    assert "no host then" in body and "queued" not in body
    coordinator.owner["b"] = "h1"  # b placed on h1 too: every turn waits for its answer
    coordinator.hosts["h1"].streams.add("b")
    assert controls.ask("and now?", ALL_STREAMS) == Feedback(True, "")
    assert [t.queued for t in live.snapshot().turns if t.question == "and now?"] == [True, True]


def page_elements(page) -> dict[str, bool]:
    """{elem_id: visible} of the page's components."""
    return {block.elem_id: block.visible for block in page.blocks.values() if getattr(block, "elem_id", None)}


@pytest.mark.parametrize("fleet_page", [False, True])
def test_the_fleets_page_leaves_out_what_the_fleet_cannot_do(tmp_path, fleet_page):
    coordinator, _ = fleet(tmp_path)
    commands = FleetCommands(coordinator)
    live = LiveState(streams=("a", "b"))
    controls = Controls(commands, live, CaptureOptions(), max_upload_bytes=2**20)
    info = render.PageInfo("tiny", "-", "1 host", "float32", "inf-mllm", 256, 16, "fleet", "each host's own")
    previews = PreviewFiles(tmp_path / "previews")
    abilities = FleetAssistant.abilities if fleet_page else Assistant.abilities  # what each desk says it can do
    page = build_page(live, controls, info, commands.schedule, previews, abilities=abilities)
    try:
        elements = page_elements(page)
    finally:
        page.close()
    in_place = {"start", "stop", "reset", "standing", "every", "apply", "standing-msg"}
    assert elements.keys() & in_place == (set() if fleet_page else in_place)
    one_box_sources = {"source-kind", "upload", "camera"}  # the fleet's page adds by URL only
    assert {name for name in one_box_sources if elements[name]} == (set() if fleet_page else one_box_sources)
    kept = {"ask-box", "ask", "ask-stream", "remove-stream", "add-stream", "source-stream", "location", "status"}
    assert all(elements[name] for name in kept)


def test_the_page_of_a_fleet_without_a_cluster_exits_2_with_the_reason(capsys):
    argv = ["--ray", f"127.0.0.1:{free_port()}", "--ui", "--port", str(free_port()), "--model", "tiny"]
    assert main([*argv, "--stream", f"a={video(4)}", "--timeline", ""]) == 2
    assert "no Ray head answers at 127.0.0.1:" in capsys.readouterr().err
