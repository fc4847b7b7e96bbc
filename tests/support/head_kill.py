"""The head of a fleet killed with SIGKILL while a burst of alerts and answers sits in its outputs, then a new head on
the same box and files (issue 39, "Nothing lost"): the scenario of tests/fleet/test_fleet_head_killed.py and of
scripts/bench_fleet_loss.py's head-kill rows, which check and count its `HeadKill` outcome.

On a Ray test cluster on this box (tests/support/ray_cluster.py: the session's in the test, one of its own in the
bench), the head runs as the command line does (`python -m app --ray ...`, the tiny model, two always-on watches
checked every 4 s and the standing question every second on 1 s clips (the burst comes within seconds, long before
the webhook output gives up on its first request), a real mosquitto, a webhook receiver and an SQLite timeline).
Once it writes the timeline, the broker is frozen (SIGSTOP: it acknowledges nothing); the webhook receiver answers
nothing from the start. When the burst is in the head's outputs, the head is killed (Ray ends its host with it),
the broker and the receiver are let go, and a new head is started. The hosts' spools (in `$EDGE_ASSISTANT_DATA`,
which the caller points at a folder of its own) say what the first run made.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from fleet.spools import spool_folder
from tests.support.app_helpers import REPO, video
from tests.support.mqtt_broker import MosquittoBroker
from tests.support.mqtt_watcher import Watcher
from tests.support.ray_cluster import LOOPBACK_ENV, ray_cluster
from tests.support.webhook_receiver import Receiver

WAIT_S = 180
BURST_ROWS = 8  # alert and answer rows in the timeline before the kill (the burst in the outputs)
SITE = """
[alerts.w0]
question = "Is anything there?"
every = 4.0
threshold = 0.0
on_after = 1
[alerts.w1]
question = "Is anything moving?"
every = 4.0
threshold = 0.0
on_after = 1
"""


@dataclass
class HeadKill:
    """What a head kill left. made: the first run's alerts and answers (ident -> `<spool id>:<seq>`, its spool read
    after the kill); acked: spool id -> seq acknowledged then; *_at_kill: what the timeline and the webhook had at the
    kill; timeline, broker, webhook: every ident each got in the end (repeats kept); keys: the timeline's event keys;
    recovery_s: from the second head's start until every made event was everywhere (or the wait ran out)."""

    made: dict[tuple, str] = field(default_factory=dict)
    acked: dict[str, int] = field(default_factory=dict)
    timeline_at_kill: set[tuple] = field(default_factory=set)
    webhook_at_kill: set[tuple] = field(default_factory=set)
    timeline: list[tuple] = field(default_factory=list)
    broker: list[tuple] = field(default_factory=list)
    webhook: list[tuple] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    recovery_s: float = 0.0
    exit_code: int | None = None
    output: str = ""

    @property
    def unacked(self) -> set[tuple]:
        """The made events their spool had not seen acknowledged at the kill: what the next run must deliver."""
        return {i for i, key in self.made.items() if _seq(key) > self.acked.get(key.rsplit(":", 1)[0], 0)}

    def missing(self) -> dict[str, int]:
        got = {"timeline": self.timeline, "webhook": self.webhook, "broker": self.broker}
        return {sink: len(set(self.made) - set(idents)) for sink, idents in got.items()}


def _seq(key: str) -> int:
    return int(key.rsplit(":", 1)[1])


def ident(record: dict) -> tuple:
    """What names an alert or an answer wherever it arrives: (alert id, state), or the answer's round and time."""
    if record["type"] == "alert":
        return ("alert", record["id"], record["state"])
    return ("answer", record["round"], round(record["t_wall"], 3))


def spooled() -> tuple[dict[tuple, str], dict[str, int]]:
    """What the box's spools hold: ident -> `<spool id>:<seq>`, and spool id -> its acknowledged seq."""
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


def timeline_rows(path: Path, column: str = "") -> list:
    """The alert and answer rows as idents (or the values of `column`)."""
    if not path.exists():
        return []
    with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=10) as conn:
        conn.row_factory = sqlite3.Row
        if conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'moments'").fetchone()[0] == 0:
            return []  # the file is there, its tables not yet
        rows = conn.execute("SELECT * FROM moments WHERE kind IN ('alert', 'answer') ORDER BY id").fetchall()
    if column:
        return [r[column] for r in rows if column in r.keys()]
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


def wait_until(check, what: str, heads: list[subprocess.Popen], output: Path | None = None) -> None:
    """Until `check()`; AssertionError (with the end of the heads' `output`) when a head ended meanwhile or WAIT_S
    passed."""
    deadline = time.monotonic() + WAIT_S
    while not check():
        tail = output.read_text()[-3000:] if output is not None and output.exists() else ""
        for head in heads:
            assert head.poll() is None, f"the head ended (code {head.returncode}) while waiting for {what}:\n{tail}"
        assert time.monotonic() < deadline, f"no {what} within {WAIT_S} s:\n{tail}"
        time.sleep(0.3)


def writers_gone() -> bool:
    """Whether no live process holds a spool of the box (their locks can be taken)."""
    for path in spool_folder().glob("*.spool"):
        with path.open("rb") as file:
            try:
                fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False
            fcntl.flock(file, fcntl.LOCK_UN)
    return True


def start_head(command: list[str], output: Path) -> subprocess.Popen:
    with output.open("a") as out:
        return subprocess.Popen(
            command, cwd=REPO, stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT,
            env={**os.environ, **LOOPBACK_ENV, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip


@contextlib.contextmanager
def _cluster(address: str | None) -> Iterator[str]:
    if address is not None:
        yield address
        return
    with ray_cluster(["a"]) as (cluster, _nodes):
        yield cluster.address


def head_kill(work: Path, address: str | None = None) -> HeadKill:
    """Runs the scenario in folder `work` (see the module); waits at most WAIT_S for the second head to deliver.
    On the cluster at `address` (its nodes' data folder the caller's `$EDGE_ASSISTANT_DATA`: the test's shared
    cluster) or, without one, on a cluster of one box started for it."""
    site, timeline, output = work / "site.toml", work / "timeline.sqlite", work / "heads.txt"
    site.write_text(SITE)
    gate = threading.Event()  # closed: the webhook receiver answers nothing (each request waits)
    receiver = Receiver(gate=gate)
    receiver.thread.start()
    heads: list[subprocess.Popen] = []
    result = HeadKill()
    with MosquittoBroker(work) as broker, _cluster(address) as address:
        watcher = Watcher(broker.port)
        command = [sys.executable, "-m", "app", "--ray", address, "--config", str(site), "--model", "tiny",
                   "--max-streams", "1", "--every", "1", "--clip-seconds", "1", "--loop", "--max-new-tokens", "4",
                   "--quiet", "--stream", f"one={video(16)}", "--mqtt", broker.url, "--webhook", receiver.url,
                   "--timeline", str(timeline)]  # fmt: skip
        try:
            heads.append(start_head(command, output))
            wait_until(lambda: len(timeline_rows(timeline)) >= 2, "the first head writing the timeline", heads, output)
            broker.pause()  # from now on the broker acknowledges nothing
            wait_until(receiver.entered.is_set, "a webhook request (it waits on the receiver)", heads, output)
            burst = f"a burst ({BURST_ROWS} rows) in the head's outputs"
            wait_until(lambda: len(timeline_rows(timeline)) >= BURST_ROWS, burst, heads, output)
            result.timeline_at_kill = set(timeline_rows(timeline))
            heads[0].send_signal(signal.SIGKILL)
            heads[0].wait(30)
            result.webhook_at_kill = set(webhook_idents(receiver))
            broker.resume()
            gate.set()  # the receiver answers again (the dead head's requests too, to nobody)
            wait_until(writers_gone, "the end of the first run's host", [])
            result.made, result.acked = spooled()

            started = time.monotonic()
            heads.append(start_head(command, output))  # the next run, on the same box and files
            deadline = started + WAIT_S
            while time.monotonic() < deadline and heads[1].poll() is None:
                result.timeline, result.webhook = timeline_rows(timeline), webhook_idents(receiver)
                result.broker = broker_idents(watcher)
                if not any(result.missing().values()):
                    break
                time.sleep(0.3)
            result.recovery_s = time.monotonic() - started
            time.sleep(3)  # a repeat, if any, would arrive now
            heads[1].send_signal(signal.SIGINT)
            result.exit_code = heads[1].wait(90)
        finally:
            for head in heads:
                if head.poll() is None:
                    head.kill()
                    head.wait(30)
            broker.resume()
            gate.set()
            watcher.close()
            receiver.close()
        result.timeline, result.keys = timeline_rows(timeline), timeline_rows(timeline, "event_key")
        result.webhook, result.broker = webhook_idents(receiver), broker_idents(watcher)
    result.output = output.read_text()
    return result
