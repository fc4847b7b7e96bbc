"""A fleet host in this process (fleet/host.py; the coordinator makes it a Ray actor): the coordinator may
remove any of its streams, its first and its last too, and the host takes new streams after that; its drains keep
the order events were made in."""

from __future__ import annotations

import time

import pytest

from app.cli import parse_args
from app.config import AppConfig, StreamConfig
from app.runtime_watch_apply import STOPPED
from bus import Alert, Answer, AnswerPiece, Status, StatusKind
from fleet.host import FleetHost
from fleet.hosts import host_config
from fleet.wire import from_wire
from tests.support.app_helpers import video


def removed(host: FleetHost) -> list[str]:
    events = [from_wire(item) for item in host.drain()[0]]
    return [e.stream for e in events if isinstance(e, Status) and e.kind is StatusKind.STREAM_REMOVED]


def test_a_host_removes_its_first_and_its_last_stream_and_takes_new_ones_after():
    clip = str(video(8))
    args = ["--ray", "auto", "--model", "tiny", "--timeline", "", "--every", "0", "--loop"]
    config = AppConfig.from_args(parse_args([*args, "--stream", f"a={clip}", "--stream", f"b={clip}"]))
    host = FleetHost(host_config(config), "box-0")
    try:
        for stream in config.streams:
            host.start_stream(stream)
        assert host.streams() == ["a", "b"]
        host.remove_stream("a")  # its first stream: b takes its place as the assistant's default
        assert host.streams() == ["b"] and removed(host) == ["a"]
        host.ask("what is there?")  # every stream of the host: b
        host.remove_stream("b")  # its last: the assistant goes with it
        assert host.streams() == [] and removed(host) == ["b"]
        with pytest.raises(ValueError, match="runs no stream named 'b'"):
            host.remove_stream("b")
        host.start_stream(StreamConfig("c", config.streams[0].capture, config.schedule))
        assert host.streams() == ["c"]
    finally:
        host.stop()


def test_a_drain_holding_a_whole_answer_gives_its_pieces_before_the_answer():
    """The answer is spooled (durable), its pieces are not: a drain that finds both must still give them in the
    order they were made, or the head's API ends a streamed ask at the answer and drops its last pieces."""
    clip = str(video(8))
    args = ["--ray", "auto", "--model", "tiny", "--timeline", "", "--every", "0", "--loop", "--stream", f"a={clip}"]
    config = AppConfig.from_args(parse_args(args))
    host = FleetHost(host_config(config), "box-0")
    try:
        host.start_stream(config.streams[0])
        host.drain()
        host.ask("what is there?", "a", request="r1")
        deadline = time.monotonic() + 60
        while not host.spools.has_unsent():  # the answer is spooled: every piece was made before it
            assert time.monotonic() < deadline, "no answer within 60 s"
            time.sleep(0.05)
        events = [from_wire(item) for item in host.drain()[0]]
        asked = [e for e in events if isinstance(e, (AnswerPiece, Answer)) and e.request == "r1"]
        assert [type(e) for e in asked] == [AnswerPiece] * (len(asked) - 1) + [Answer] and len(asked) > 1
        assert "".join(e.text for e in asked[:-1]).strip() == asked[-1].stats.answer.strip()
    finally:
        host.stop()


def test_a_host_that_stops_ends_the_alerts_that_are_on_before_its_last_drain(tmp_path):
    """The head drains a stopped host once more: an alert on at the stop is ended there, once, with the reason
    (issue 50), so the head's outputs (MQTT, Home Assistant) and timeline see it end."""
    alerts = tmp_path / "alerts.toml"
    alerts.write_text('[alerts.always]\nquestion = "Is anything there?"\nthreshold = 0.0\nevery = 4\non_after = 1\n')
    args = ["--ray", "auto", "--model", "tiny", "--timeline", "", "--every", "0", "--loop", "--config", str(alerts)]
    config = AppConfig.from_args(parse_args([*args, "--stream", f"a={video(8)}"]))
    host = FleetHost(host_config(config), "box-0")
    try:
        host.start_stream(config.streams[0])
        deadline, begun = time.monotonic() + 60, []
        while not begun:
            assert time.monotonic() < deadline, "no alert began within 60 s"
            begun = [e for e in map(from_wire, host.drain(wait_s=0.5)[0]) if isinstance(e, Alert)]
    finally:
        host.stop()
    ends = [e for e in map(from_wire, host.drain()[0]) if isinstance(e, Alert)]
    assert [(e.id, e.state, e.reason) for e in ends] == [(begun[0].id, "end", STOPPED)]
