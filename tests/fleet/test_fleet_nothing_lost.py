"""Nothing lost when a host dies (issue 39): on a real Ray cluster of two nodes on this machine, with the tiny model,
a real broker and an SQLite timeline, a host makes a burst of alerts and answers that the head has not drained
yet (its loop is held), and its worker process is killed with SIGKILL. After recovery every alert and answer the
host made (its spool on the box, read before the kill) reaches the head's bus, the broker and the timeline once,
and the alerts it began (replayed from its spool) end once, with reason "host lost": no watch is left to end them."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from app.cli import parse_args
from app.config import AppConfig
from app.startup import start_publisher, start_timeline_writer
from bus import Alert, Answer, Event, EventBus, Status, StatusKind
from bus.records import to_record
from fleet.coordinator import Coordinator
from fleet.spools import spool_folder
from tests.support.app_helpers import video
from tests.support.mqtt_broker import MosquittoBroker
from tests.support.mqtt_watcher import Watcher
from timeline.reader import TimelineReader

pytest.importorskip("ray")

WAIT_S = 180
QUESTIONS = 6
WATCHES = ("w0", "w1", "w2")  # each always on (threshold 0): a burst of alert begins as the stream starts


class Recorder:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.cond = threading.Condition()

    def __call__(self, event: Event) -> None:
        with self.cond:
            self.events.append(event)
            self.cond.notify_all()

    def wait_until(self, check, what: str) -> None:
        with self.cond:
            assert self.cond.wait_for(lambda: check(self.events), WAIT_S), f"no {what} within {WAIT_S} s"


def made(folder: Path, host: str, least: int) -> list[dict]:
    """The alerts and answers `host` spooled (what it made), once there are at least `least` of them."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        lines = []
        for path in folder.glob(f"{host}-*.spool"):
            lines += [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")]
        events = [line["event"] for line in lines if "event" in line]
        if len(events) >= least:
            return events
        time.sleep(0.2)
    raise AssertionError(f"host {host} spooled fewer than {least} alerts and answers within {WAIT_S} s")


def key(record: dict) -> tuple:
    """What names an alert or an answer the host made: (alert id, state) or the answer's question."""
    return ("alert", record["id"], record["state"]) if record["type"] == "alert" else ("answer", record["question"])


def test_a_host_killed_after_a_burst_loses_no_alert_or_answer(tmp_path, own_data_folder, shared_ray_cluster) -> None:
    import ray

    clip = video(16)
    timeline = tmp_path / "timeline.sqlite"
    cluster = shared_ray_cluster  # its worker killed, not its node: the session's cluster serves
    with MosquittoBroker(tmp_path) as broker:
        watcher = Watcher(broker.port)
        args = parse_args(
            ["--ray", cluster.address, "--model", "tiny", "--max-streams", "1", "--every", "0", "--loop",
             "--max-new-tokens", "4", "--stream", f"one={clip}", "--mqtt", broker.url, "--timeline", str(timeline)]
        )  # fmt: skip
        rule = {"question": "Is anything there?", "every": 1.0, "threshold": 0.0, "on_after": 1}
        args.alert_tables = {name: dict(rule) for name in WATCHES}
        config = AppConfig.from_args(args)
        bus, recorder = EventBus(), Recorder()
        bus.subscribe(recorder)
        publisher = start_publisher(config, {"one": list(WATCHES)}, bus)
        timeline_writer = start_timeline_writer(config, bus, None)
        ray.init(address=cluster.address, namespace=cluster.namespace, log_to_driver=False)
        coordinator = Coordinator(config, config.fleet, bus, ray)
        try:
            coordinator.start()
            victim = coordinator.hosts[coordinator.owner["one"]]
            with coordinator._lock:  # the loop stops draining (it waits for the lock to place streams)
                for i in range(QUESTIONS):
                    coordinator.ask(f"question {i}: what is there?", "one")
                with_spool = made(spool_folder(), victim.name, QUESTIONS + len(WATCHES))
                with recorder.cond:
                    before = {key(to_record(e)) for e in recorder.events if isinstance(e, (Alert, Answer))}
                os.kill(victim.info.pid, signal.SIGKILL)
            keys = [key(record) for record in with_spool]
            assert len(keys) == len(set(keys))
            assert set(keys) - before, "the head had drained everything before the kill: nothing was at stake"
            recorder.wait_until(lambda events: any(e.kind is StatusKind.HOST_LOST for e in events
                                                   if isinstance(e, Status)), "host lost")  # fmt: skip
            begun = {k[1] for k in keys if k[0] == "alert" and k[2] == "begin"}
            recorder.wait_until(
                lambda events: (
                    set(keys) | {("alert", i, "end") for i in begun}
                    <= {key(to_record(e)) for e in events if isinstance(e, (Alert, Answer))}
                ),
                "delivery of every alert and answer the host made, and the end of its alerts",
            )
            time.sleep(3)  # a repeat, if any, would arrive now
        finally:
            coordinator.stop()
            ray.shutdown()
            for output in (publisher, timeline_writer):
                bus.unsubscribe(output)
                output.close(timeout=10)
        time.sleep(0.5)  # the broker's last deliveries to the watcher
        watcher.close()

    on_bus = [key(to_record(e)) for e in recorder.events if isinstance(e, (Alert, Answer))]
    assert len(on_bus) == len(set(on_bus)), "an alert or answer was published twice on the head's bus"
    ends = [e for e in recorder.events if isinstance(e, Alert) and e.id in begun and e.state == "end"]
    assert sorted(e.id for e in ends) == sorted(begun) and {e.reason for e in ends} == {"host lost"}
    mqtt = [json.loads(m.payload) for m in watcher.messages if m.topic.endswith(("/events", "/answer"))]
    on_mqtt = [k for k in map(key, (m for m in mqtt if m.get("type") in ("alert", "answer"))) if k in set(keys)]
    assert sorted(on_mqtt) == sorted(keys), "the broker did not get every alert and answer the host made, once"
    with TimelineReader(timeline) as reader:
        rows = reader.search(None, limit=10000)
    answers = [m.question for m in rows if m.kind == "answer"]
    made_questions = [k[1] for k in keys if k[0] == "answer"]
    assert all(answers.count(q) == 1 for q in made_questions), "the timeline lost or repeated an answer"
    alerts = sorted((m.alert, m.state) for m in rows if m.kind == "alert" and m.stream == "one")
    bus_alerts = sorted((e.alert, e.state) for e in recorder.events if isinstance(e, Alert))
    assert alerts == bus_alerts, "the timeline's alerts differ from the head's"
