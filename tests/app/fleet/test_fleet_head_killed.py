"""Nothing lost when the HEAD dies (issue 39): on a real Ray cluster on this machine, the head runs as the command line
does (`python -m app --ray ...`, the tiny model, a real broker, a webhook receiver and an SQLite timeline). While
the broker is frozen (SIGSTOP: nothing acknowledged) and the webhook receiver answers nothing, the head's outputs
fill with a burst of alerts and answers; the head is then killed with SIGKILL (Ray ends its hosts with it). A new
head on the same box and files delivers what the dead one had not: every alert and answer the first run's host
made (its spool, read after the kill) is in the timeline exactly once and reached the broker and the webhook at
least once."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app.fleet.spools import spool_folder
from tests.support.app_helpers import REPO, video
from tests.support.mqtt_broker import MosquittoBroker
from tests.support.mqtt_watcher import Watcher
from tests.support.ray_cluster import LOOPBACK_ENV, ray_cluster
from tests.support.webhook_receiver import Receiver

pytest.importorskip("ray")

WAIT_S = 180
SITE = """
[alerts.w0]
question = "Is anything there?"
every = 1.0
threshold = 0.0
on_after = 1
[alerts.w1]
question = "Is anything moving?"
every = 1.0
threshold = 0.0
on_after = 1
"""


def ident(record: dict) -> tuple:
    """What names an alert or an answer wherever it arrives: (alert id, state), or the answer's round and time."""
    if record["type"] == "alert":
        return ("alert", record["id"], record["state"])
    return ("answer", record["round"], round(record["t_wall"], 3))


def spooled() -> tuple[dict[tuple, str], dict[str, int]]:
    """What the hosts spooled: ident -> `<spool id>:<seq>`, and spool id -> its acknowledged seq."""
    made, acked = {}, {}
    for path in spool_folder().glob("*.spool"):
        spool_id = path.name.removesuffix(".spool")
        for line in path.read_text().splitlines():
            if not line.endswith("}"):
                continue  # a line being written
            entry = json.loads(line)
            if "ack" in entry:
                acked[spool_id] = entry["ack"]
            else:
                made[ident(entry["event"])] = f"{spool_id}:{entry['seq']}"
    return made, acked


def timeline_rows(path: Path) -> list[tuple]:
    """The alert and answer rows as idents."""
    if not path.exists():
        return []
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=10) as conn:
        conn.row_factory = sqlite3.Row
        if conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'moments'").fetchone()[0] == 0:
            return []  # the file is there, its tables not yet
        rows = conn.execute("SELECT * FROM moments WHERE kind IN ('alert', 'answer') ORDER BY id").fetchall()
    return [
        ("alert", r["alert_id"], r["state"]) if r["kind"] == "alert" else ("answer", r["round"], round(r["t_wall"], 3))
        for r in rows
    ]


def webhook_idents(receiver: Receiver) -> list[tuple]:
    with receiver.cond:
        return [ident(json.loads(body)) for _, body in receiver.requests if body]


def broker_idents(watcher: Watcher) -> list[tuple]:
    with watcher.cond:
        payloads = [json.loads(m.payload) for m in watcher.messages if m.topic.endswith(("/events", "/answer"))]
    return [ident(p) for p in payloads if p.get("type") in ("alert", "answer")]


def wait_until(check, what: str, heads: list[subprocess.Popen], detail=lambda: "") -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        for head in heads:
            assert head.poll() is None, f"the head ended (code {head.returncode}) while waiting for {what}"
        assert time.monotonic() < deadline, f"no {what} within {WAIT_S} s {detail()}"
        time.sleep(0.3)


def start_head(command: list[str], output: Path) -> subprocess.Popen:
    with output.open("a") as out:
        return subprocess.Popen(
            command, cwd=REPO, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, **LOOPBACK_ENV, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip


def test_a_head_killed_with_events_in_its_outputs_loses_none_and_the_timeline_keeps_each_once(tmp_path) -> None:
    site = tmp_path / "site.toml"
    site.write_text(SITE)
    timeline = tmp_path / "timeline.sqlite"
    output = tmp_path / "heads.txt"
    gate = threading.Event()  # closed: the webhook receiver answers nothing (each request waits)
    receiver = Receiver(gate=gate)
    receiver.thread.start()
    heads: list[subprocess.Popen] = []
    with MosquittoBroker(tmp_path) as broker, ray_cluster(["a"]) as (cluster, _nodes):
        watcher = Watcher(broker.port)
        command = [sys.executable, "-m", "app", "--ray", cluster.address, "--config", str(site), "--model", "tiny",
                   "--max-streams", "1", "--every", "2", "--loop", "--max-new-tokens", "4", "--quiet",
                   "--stream", f"one={video(16)}", "--mqtt", broker.url, "--webhook", receiver.url,
                   "--timeline", str(timeline)]  # fmt: skip
        try:
            heads.append(start_head(command, output))
            wait_until(lambda: len(timeline_rows(timeline)) >= 2, "the first head writing the timeline", heads)
            broker.pause()  # from now on the broker acknowledges nothing
            wait_until(lambda: receiver.entered.is_set(), "a webhook request (it waits on the receiver)", heads)
            wait_until(lambda: len(timeline_rows(timeline)) >= 8, "a burst in the first head's outputs", heads)
            in_timeline = set(timeline_rows(timeline))
            heads[0].send_signal(signal.SIGKILL)
            heads[0].wait(30)
            at_kill = set(webhook_idents(receiver))
            broker.resume()
            gate.set()  # the receiver answers again (the dead head's requests too, to nobody)

            wait_until(_writer_gone, "the end of the first run's host", [])
            made, acked = spooled()  # the first run's host: every alert and answer it made, what was acknowledged
            assert set(made) - at_kill, "the webhook had every event before the kill: nothing was at stake"

            heads.append(start_head(command, output))  # the next run, on the same box and files

            def missing() -> dict[str, int]:
                got = {"timeline": timeline_rows(timeline), "webhook": webhook_idents(receiver),
                       "broker": broker_idents(watcher)}  # fmt: skip
                return {sink: len(set(made) - set(idents)) for sink, idents in got.items()}

            wait_until(
                lambda: not any(missing().values()),
                f"every one of the {len(made)} events the first run made in the timeline, the webhook and the broker",
                heads[1:],
                lambda: f"(missing: {missing()})",
            )
            time.sleep(3)  # a repeat, if any, would arrive now
            heads[1].send_signal(signal.SIGINT)
            assert heads[1].wait(90) == 0, output.read_text()[-3000:]
        finally:
            for head in heads:
                if head.poll() is None:
                    head.kill()
                    head.wait(30)
            broker.resume()
            gate.set()
            watcher.close()
            receiver.close()

    unacked = {i for i, key in made.items() if int(key.rsplit(":", 1)[1]) > acked.get(key.rsplit(":", 1)[0], 0)}
    assert unacked & in_timeline, "nothing in the timeline was unacknowledged at the kill: no repeat was at stake"
    rows = timeline_rows(timeline)
    repeated = sorted(i for i in made if rows.count(i) != 1)
    assert not repeated, f"the timeline kept {len(repeated)} of {len(made)} events other than once: {repeated[:5]}"
    with sqlite3.connect(timeline) as conn:
        keys = [k for (k,) in conn.execute("SELECT event_key FROM moments WHERE event_key IS NOT NULL")]
    assert set(made.values()) <= set(keys) and len(keys) == len(set(keys)), "a spooled event's key missing or twice"
    assert set(made) <= set(webhook_idents(receiver)) and set(made) <= set(broker_idents(watcher))
    assert "Traceback" not in output.read_text(), output.read_text()[-3000:]


def _writer_gone() -> bool:
    """Whether no live process holds a spool (the dead head's host ended: its file's lock can be taken)."""
    import fcntl

    for path in spool_folder().glob("*.spool"):
        with path.open("rb") as file:
            try:
                fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            fcntl.flock(file, fcntl.LOCK_UN)
    return True
