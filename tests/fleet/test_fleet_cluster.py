"""The fleet on a real Ray cluster of several nodes on this machine (tests/support/ray_cluster.py), with tiny models, a
real PostgreSQL timeline and a real MQTT broker: streams are placed within each host's room and by their pins,
a question reaches the stream's host and its answer cites that stream, and a node lost mid-run moves its streams
to the others within the deadline, ends its open alerts once, and publishes nothing twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app.__main__ import main
from app.cli import parse_args
from app.config import AppConfig, StreamConfig
from app.startup import start_publisher, start_timeline_writer
from bus import Alert, Answer, ClipEvent, Event, EventBus, Status, StatusKind
from fleet.coordinator import Coordinator
from tests.support.app_helpers import REPO, read_log, video
from tests.support.mqtt_broker import MosquittoBroker
from tests.support.mqtt_watcher import Watcher
from tests.support.postgres_server import PASSWORD
from tests.support.ray_cluster import LOOPBACK_ENV, add_host_node
from timeline.postgres_target import PASSWORD_ENV
from timeline.reader import TimelineReader

pytest.importorskip("ray")

WAIT_S = 180  # bound on every wait (tiny models load in a few seconds each; the machine may be loaded)


class Recorder:
    """The head's bus as a list, with waits on it."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.cond = threading.Condition()

    def __call__(self, event: Event) -> None:
        with self.cond:
            self.events.append(event)
            self.cond.notify_all()

    def wait_for(self, match, what: str, timeout: float = WAIT_S) -> Event:
        def found():
            return next((e for e in self.events if match(e)), None)

        with self.cond:
            assert self.cond.wait_for(found, timeout), f"no {what} within {timeout} s; got {self.summary()}"
            return found()

    def of(self, cls: type, **fields) -> list:
        with self.cond:
            return [e for e in self.events if isinstance(e, cls) and all(getattr(e, k) == v for k, v in fields.items())]

    def summary(self) -> list[str]:
        return [f"{e.TYPE}:{e.stream}:{getattr(e, 'message', '')[:60]}" for e in self.events[-30:]]


def placed_on(recorder: Recorder, stream: str, after: int = 0) -> str:
    """The host a stream was placed on (its latest STREAM_PLACED status after event index `after`)."""
    event = recorder.wait_for(
        lambda e: e in recorder.events[after:] and isinstance(e, Status) and e.stream == stream
        and e.kind is StatusKind.STREAM_PLACED,
        f"placement of {stream}",
    )  # fmt: skip
    return event.message.removeprefix("runs on host ").split(";")[0]


def wait_for_clips(log: Path, streams: set[str]) -> None:
    """Until the event log shows a clip of each stream (bounded)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            if log.exists() and streams <= {e.stream for e in read_log(log) if isinstance(e, ClipEvent)}:
                return
        except ValueError:  # a line being written
            pass
        time.sleep(0.5)
    raise AssertionError(f"no clip of every stream of {sorted(streams)} within {WAIT_S} s")


def test_the_command_line_places_streams_by_room_and_pin_and_routes_questions(shared_ray_cluster, tmp_path):
    """`python -m app --ray ADDRESS --config site.toml --mqtt URL --mqtt-commands` (the session's cluster): 3
    streams on 2 hosts with room for 2 each; `door` is pinned to node b. Typed questions, and one asked over MQTT
    (the head takes the commands as one box does), reach each stream's host; each answer names and cites its own
    stream."""
    clip = video(16)
    site = tmp_path / "site.toml"
    site.write_text(
        f'[streams.door]\nsource = "{clip}"\nnode = "b"\n'
        f'[streams.yard]\nsource = "{clip}"\n'
        f'[streams.shop]\nsource = "{clip}"\n'
    )
    log = tmp_path / "events.jsonl"
    with MosquittoBroker(tmp_path) as broker:
        command = [sys.executable, "-m", "app", "--ray", shared_ray_cluster.address, "--config", str(site),
                   "--model", "tiny", "--max-streams", "2", "--every", "0", "--loop", "--max-rounds", "3",
                   "--timeline", "", "--log-jsonl", str(log), "--mqtt", broker.url, "--mqtt-commands"]  # fmt: skip
        watcher = Watcher(broker.port)
        with subprocess.Popen(
            command, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, **LOOPBACK_ENV},
        ) as app:  # fmt: skip
            try:
                wait_for_clips(log, {"door", "yard", "shop"})  # questions about what each stream has seen
                watcher.client.publish("edge-assistant/yard/ask", "what is in the yard?", qos=1)
                result = watcher.wait_topic("edge-assistant/ask/result").json()
                assert result["ok"] and result["streams"] == ["yard"], result
                watcher.wait_for(lambda m: m.topic == "edge-assistant/yard/answer", "the yard's answer over MQTT")
                app.stdin.write("door: what is at the door?\nshop: what is in the shop?\n")
                app.stdin.close()
                app.wait(timeout=WAIT_S)
            finally:
                app.kill()
                watcher.close()
            stderr = app.stderr.read()
    assert app.returncode == 0, stderr[-3000:]
    events = read_log(log)
    placed = {e.stream: e.message for e in events if isinstance(e, Status) and e.kind is StatusKind.STREAM_PLACED}
    hosts = {stream: message.removeprefix("runs on host ").split(";")[0] for stream, message in placed.items()}
    assert set(hosts) == {"door", "yard", "shop"}
    assert hosts["door"].startswith("b-")  # pinned by its edge_node label
    per_host = {h: sum(1 for x in hosts.values() if x == h) for h in hosts.values()}
    assert max(per_host.values()) <= 2 and len(per_host) == 2  # within each host's room, both hosts used
    joined = [e for e in events if isinstance(e, Status) and e.kind is StatusKind.HOST_JOINED]
    assert len(joined) == 2
    answers = {e.stream: e for e in events if isinstance(e, Answer)}
    assert set(answers) == {"door", "yard", "shop"}
    for stream, answer in answers.items():
        assert answer.question.endswith(f"in the {stream}?") or answer.question.endswith(f"at the {stream}?")
        assert answer.evidence and {cited.stream for cited in answer.evidence} == {stream}
    # no host's own ready/stopped reads as the fleet's: exactly one of each for the whole run
    assert [e.message for e in events if isinstance(e, Status) and e.kind is StatusKind.READY][0].startswith("fleet")
    assert len([e for e in events if isinstance(e, Status) and e.kind is StatusKind.STOPPED]) == 1


def test_a_lost_node_moves_its_streams_ends_their_alerts_once_and_publishes_nothing_twice(
    tmp_path, postgres_target, monkeypatch, capsys, shared_ray_cluster
):
    """Three hosts, one stream each, a watch that is always on (threshold 0). The node of `two` is removed: `two`
    runs again on another host within the failover deadline and answers there; its alert ends once (reason: host
    lost) on the bus, on MQTT and in the timeline; no alert id is published or written twice; a box that joins
    later takes a new stream; `history` finds the answers of every node."""
    import ray

    monkeypatch.setenv(PASSWORD_ENV, PASSWORD)
    clip = video(16)
    cluster = shared_ray_cluster.cluster  # nodes a and b, and c for this test (the lease restores a and b after it)
    nodes = [*shared_ray_cluster.nodes, add_host_node(cluster, "c")]
    cluster.wait_for_nodes()
    with MosquittoBroker(tmp_path) as broker:
        watcher = Watcher(broker.port)
        args = parse_args(
            ["--ray", cluster.address, "--model", "tiny", "--max-streams", "2", "--every", "0", "--loop",
             "--stream", f"one={clip}", "--stream", f"two={clip}", "--stream", f"three={clip}",
             "--mqtt", broker.url,
             "--timeline", postgres_target.url, "--ray-failover-s", "60"]
        )  # fmt: skip
        args.alert_tables = {"busy": {"question": "Is anything there?", "every": 2.0, "threshold": 0.0, "on_after": 1}}
        config = AppConfig.from_args(args)
        bus, recorder = EventBus(), Recorder()
        bus.subscribe(recorder)
        publisher = start_publisher(config, {s.name: ["busy"] for s in config.streams}, bus)
        timeline = start_timeline_writer(config, bus, None)
        ray.init(address=cluster.address, namespace=shared_ray_cluster.namespace, log_to_driver=False)
        coordinator = Coordinator(config, config.fleet, bus, ray)
        try:
            coordinator.start()
            for stream in ("one", "two", "three"):
                recorder.wait_for(
                    lambda e, s=stream: isinstance(e, Alert) and e.stream == s and e.began, f"{stream} alert"
                )
                coordinator.ask(f"what is in {stream}?", stream)
                recorder.wait_for(lambda e, s=stream: isinstance(e, Answer) and e.stream == s, f"{stream} answer")
            victim = coordinator.owner["two"]
            node_id = coordinator.hosts[victim].node.node_id
            others = {h for s, h in coordinator.owner.items() if s != "two"}
            mark = len(recorder.events)
            cluster.remove_node(next(n for n in nodes if n.node_id == node_id))
            lost = recorder.wait_for(lambda e: isinstance(e, Status) and e.kind is StatusKind.HOST_LOST, "host lost")
            new_host = placed_on(recorder, "two", after=mark)
            placed = recorder.of(Status, stream="two", kind=StatusKind.STREAM_PLACED)[-1]
            assert new_host != victim and new_host in others
            assert placed.t_wall - lost.t_wall < config.fleet.failover_s
            coordinator.ask("what is in two now?", "two")
            recorder.wait_for(
                lambda e: isinstance(e, Answer) and e.stream == "two" and e.question == "what is in two now?",
                "the moved stream's answer",
            )
            ends = [e for e in recorder.of(Alert, stream="two") if e.state == "end" and e.reason == "host lost"]
            assert len(ends) == 1
            # a box that joins later gets a host, which takes a new stream (it has the most room)
            add_host_node(cluster, "d")
            recorder.wait_for(
                lambda e: isinstance(e, Status) and e.kind is StatusKind.HOST_JOINED and "host d-" in e.message,
                "the new box's host",
            )
            coordinator.add_stream(StreamConfig("four", config.streams[0].capture, config.schedule))
            assert placed_on(recorder, "four").startswith("d-")
        finally:
            coordinator.stop()
            ray.shutdown()
            for output in (publisher, timeline):
                bus.unsubscribe(output)
                output.close(timeout=10)
        time.sleep(0.5)  # the broker's last deliveries to the watcher
        watcher.close()

    alerts = recorder.of(Alert)
    keys = [(e.id, e.state) for e in alerts]
    assert len(keys) == len(set(keys)), "an alert begin or end was published twice on the bus"
    on_mqtt = [json.loads(m.payload) for m in watcher.messages if m.topic.endswith("/events")]
    mqtt_keys = [(m["id"], m["state"]) for m in on_mqtt if m.get("type") == "alert"]
    assert sorted(mqtt_keys) == sorted(keys), "MQTT carried other alerts than the bus, or one twice"
    assert "host lost" in {m.get("reason") for m in on_mqtt}
    with TimelineReader(postgres_target) as reader:
        written = [(m.stream, m.state) for m in reader.search(None, limit=1000) if m.kind == "alert"]
    assert sorted(written) == sorted((e.stream, e.state) for e in alerts), "the timeline's alerts differ from the bus's"
    capsys.readouterr()  # `history` through main() in this process: its output is what it printed
    code = main(["history", "--limit", "1000", "--timeline", postgres_target.url, "--json"])
    history = capsys.readouterr()
    assert code == 0, history.err
    found = [json.loads(line) for line in history.out.splitlines()]
    assert {m["stream"] for m in found if m["kind"] == "answer"} == {"one", "two", "three"}  # every node's answers
