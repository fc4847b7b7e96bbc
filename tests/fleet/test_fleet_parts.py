"""The fleet's pure parts: placement by room and pins, the node table read as slots, what the head tracks from the
hosts' events, the wire format of events between machines, and the --ray settings (no Ray started here)."""

from __future__ import annotations

import numpy as np
import pytest

from app.fleet_config import FleetConfig
from bus import Alert, Answer, AnswerStats, ClipEvent, ClipStats, End, Status, StatusKind
from fleet.cluster import FleetError, check_reachable, split_address
from fleet.nodes import node_slots
from fleet.placement import HostRoom, place
from fleet.tracking import FleetTracking
from fleet.wire import PREVIEW_WIDTH, from_wire, to_wire
from tests.support.mqtt_broker import free_port


def hosts(*rooms: int, placed: tuple[int, ...] = ()) -> list[HostRoom]:
    placed = placed or (0,) * len(rooms)
    return [
        HostRoom(f"h{i}", room, used, frozenset({f"node{i}"}))
        for i, (room, used) in enumerate(zip(rooms, placed, strict=True))
    ]


def test_streams_spread_over_the_hosts_with_the_most_room_left():
    plan = place(["a", "b", "c", "d"], {}, hosts(2, 2))
    assert sorted(plan.hosts.values()) == ["h0", "h0", "h1", "h1"]
    assert not plan.waiting
    # a host that already runs streams gets the new ones last
    plan = place(["x", "y"], {}, hosts(4, 4, placed=(3, 0)))
    assert plan.hosts == {"x": "h1", "y": "h1"}


def test_no_host_takes_more_than_its_room_and_the_rest_wait_with_the_reason():
    plan = place(["a", "b", "c"], {}, hosts(1, 1))
    assert len(plan.hosts) == 2 and set(plan.hosts.values()) == {"h0", "h1"}
    ((stream, why),) = plan.waiting.items()
    assert stream == "c" and "no host in the fleet has room" in why and "2 fit in all" in why


def test_a_pinned_stream_goes_to_its_node_only_and_before_the_others():
    # h1 is the only host on node1: the pinned stream takes its one place although it comes last
    plan = place(["free", "usb"], {"usb": "node1"}, hosts(1, 1))
    assert plan.hosts == {"usb": "h1", "free": "h0"}
    plan = place(["usb"], {"usb": "node1"}, hosts(3, 1, placed=(0, 1)))
    assert plan.hosts == {} and "on node 'node1'" in plan.waiting["usb"]
    plan = place(["usb"], {"usb": "garage"}, hosts(3))
    assert "no host runs on node 'garage'" in plan.waiting["usb"]


def test_a_pin_may_name_a_node_by_the_start_of_its_id():
    room = HostRoom("h", 1, 0, frozenset({"9f3a1c77d0e4", "10.0.0.5", "box"}))
    assert room.is_on("9f3a1c") and room.is_on("box") and room.is_on("10.0.0.5")
    assert not room.is_on("9f3") and not room.is_on("bo")  # too short to be an id, and not a whole name


def test_node_slots_reads_alive_nodes_that_offer_hosts_and_shares_their_gpus():
    nodes = [
        {
            "NodeID": "aa" * 28,
            "Alive": True,
            "NodeManagerAddress": "10.0.0.2",
            "NodeManagerHostname": "rack1",
            "Resources": {"edge_host": 2.0, "GPU": 1.0},
            "Labels": {"edge_node": "rack1"},
        },
        {"NodeID": "bb" * 28, "Alive": False, "Resources": {"edge_host": 1.0}},
        {"NodeID": "cc" * 28, "Alive": True, "Resources": {"CPU": 8.0}},  # the head: no hosts
    ]
    (slot,) = node_slots(nodes)
    assert slot.hosts == 2 and slot.gpus_per_host == 0.5 and slot.label == "rack1"
    assert slot.names == {"aa" * 28, "10.0.0.2", "rack1"}
    assert slot.host_name(1) == "rack1-aaaaaa-1"


def test_tracking_ends_the_open_alerts_of_a_lost_stream_once_with_the_reason():
    tracking = FleetTracking()
    tracking.saw(Alert(stream="door", id="door-person-1", alert="person", state="begin", p_yes=0.9, stream_time=4.0))
    tracking.saw(Alert(stream="door", id="door-car-2", alert="car", state="begin", p_yes=0.8, stream_time=4.0))
    tracking.saw(Alert(stream="door", id="door-car-2", alert="car", state="end", stream_time=8.0))
    tracking.saw(ClipEvent(stream="door", index=3, stream_time=12.0))
    (end,) = tracking.end_alerts("door")
    assert (end.id, end.state, end.reason, end.stream_time) == ("door-person-1", "end", "host lost", 12.0)
    assert tracking.end_alerts("door") == []


def test_tracking_counts_answers_and_ended_streams_and_forgets_an_end_when_a_stream_starts_over():
    tracking = FleetTracking()
    tracking.saw(Answer(stream="a", stats=AnswerStats(round=1)))
    tracking.saw(Answer(stream="b", stats=AnswerStats(round=1)))
    tracking.saw(End(stream="a", reason="eof"))
    tracking.saw(Status(stream="b", kind=StatusKind.DURATION_REACHED))
    assert tracking.rounds == 2 and tracking.finished == {"a", "b"}
    tracking.restarted("a")
    assert tracking.finished == {"b"}


def test_events_cross_the_wire_whole_with_a_shrunk_preview_and_the_snapshot():
    frame = np.random.default_rng(0).integers(0, 255, (480, 640, 3), dtype=np.uint8)
    clip = ClipEvent(stream="door", index=2, stream_time=8.0, stats=ClipStats(frames=4), preview=frame)
    back = from_wire(to_wire(clip))
    assert back == clip  # every recorded field (the preview is not compared)
    assert back.preview.shape == (PREVIEW_WIDTH * 480 // 640, PREVIEW_WIDTH, 3)
    alert = Alert(stream="door", id="x-1", alert="person", state="begin", snapshot=b"\xff\xd8jpeg")
    assert from_wire(to_wire(alert)).snapshot == b"\xff\xd8jpeg"
    status = Status(stream="door", kind=StatusKind.STREAM_PLACED, message="runs on host h")
    assert from_wire(to_wire(status)) == status
    with pytest.raises(ValueError, match="unknown event type"):
        from_wire({"type": "nonsense"})


def test_ray_addresses_are_checked_before_any_connection():
    assert split_address("10.0.0.1:6379") == ("10.0.0.1", 6379)
    assert split_address("[::1]:6379") == ("::1", 6379)
    for bad in ("10.0.0.1", "head:port", ":6379", "head:0"):
        with pytest.raises(ValueError, match="auto or HOST:PORT"):
            FleetConfig(address=bad)
    with pytest.raises(ValueError, match="failover_s must be > 0"):
        FleetConfig(address="auto", failover_s=0)


def test_a_head_that_does_not_answer_is_a_clear_error_at_once():
    unused_tcp_port = free_port()
    with pytest.raises(FleetError, match=f"no Ray head answers at 127.0.0.1:{unused_tcp_port}.*ray start --head"):
        check_reachable(f"127.0.0.1:{unused_tcp_port}", timeout=2.0)
