"""Nothing lost (issue 39), counted: what was made against what was delivered, lost and delivered twice.

- host kill -9: a real Ray cluster of two nodes on 127.0.0.1 (ray.cluster_utils, as the tests use), the tiny model,
  a real mosquitto and an SQLite timeline. The host running the stream makes a burst of alerts (always-on watches)
  and answers while the head's loop is held (nothing drained), then its worker process is killed with SIGKILL.
  Made: the alerts and answers in the host's spool (read before the kill); at stake: those the head had not seen
  yet; delivered, duplicated and lost are counted on the head's bus, on the broker and in the timeline after the
  recovery (the spool adopted by the other host or a new one; seconds: kill until the last one arrived).
- head kill -9 (tests/support/head_kill.py): the head runs as `python -m app --ray ...` on a one-box cluster with
  mosquitto, a webhook receiver and an SQLite timeline; with the broker frozen (SIGSTOP) and the receiver silent, a
  burst of alerts and answers fills the head's outputs and the head is killed with SIGKILL; a new head starts on the
  same box and files. Made: the first run's host's spool (read after the kill); at stake: those it had not seen
  acknowledged; delivered, duplicated and lost per output (the timeline once, the broker and the webhook at least
  once; seconds: from the new head's start, model load included, until the last one arrived).
- event log burst: records published as fast as one thread can into the --log-jsonl writer, on a real file and on
  a slow one (a millisecond per 20 lines: a disk far below the burst), through the never-dropping log queue and,
  for comparison, through the drop-oldest queue the log had before (what the terminal still uses).

Writes docs/fleet_loss.csv and docs/fleet_loss.png (--out); prints the table.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.update({"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"})  # loopback only
from tests.support.ray_auth import ray_auth_env  # noqa: E402

if "RAY_AUTH_MODE" not in os.environ:  # token authentication, as a fleet runs (`python -m app --ray` needs it)
    os.environ.update(ray_auth_env())  # before Ray is imported: it reads them once per process

from tqdm import tqdm  # noqa: E402

from app.cli import parse_args as app_args  # noqa: E402
from app.config import AppConfig  # noqa: E402
from app.startup import start_publisher, start_timeline_writer  # noqa: E402
from bus import Alert, Answer, ErrorEvent, EventBus  # noqa: E402
from bus.records import to_record  # noqa: E402
from bus.worker import QueuedSubscriber  # noqa: E402
from capture.synth import write_video  # noqa: E402
from fleet.coordinator import Coordinator  # noqa: E402
from fleet.spools import spool_folder  # noqa: E402
from outputs.event_log import JsonlLog, queued_log  # noqa: E402
from timeline.config import DATA_ENV  # noqa: E402
from timeline.reader import TimelineReader  # noqa: E402

COLUMNS = ["part", "setting", "sink", "made", "at_stake", "delivered", "duplicated", "lost", "seconds", "note"]
WATCHES = 3
WAIT_S = 180


def key(record: dict) -> tuple:
    """An alert by (id, state), an answer by its question (each asked once)."""
    return ("alert", record["id"], record["state"]) if record["type"] == "alert" else ("answer", record["question"])


def row_key(record: dict) -> tuple:
    """The same in the timeline, which keeps an alert by its name, state and time (answers: the question)."""
    if record["type"] == "answer":
        return ("answer", record["question"])
    return ("alert", record["alert"], record["state"], round(record["t_wall"], 3))


def spooled(host: str, least: int) -> list[dict]:
    """The alert and answer records `host` spooled, once there are at least `least` of them (bounded wait)."""
    deadline = time.monotonic() + WAIT_S
    while True:
        lines = [line for p in spool_folder().glob(f"{host}-*.spool") for line in p.read_text().splitlines()]
        records = [json.loads(line)["event"] for line in lines if line.endswith("}") and '"event"' in line]
        if len(records) >= least or time.monotonic() > deadline:
            return records
        time.sleep(0.2)


def counted(part: str, setting: str, sink: str, made: list, seen: list, stake: int, seconds: float) -> dict:
    wanted = set(made)
    mine = [k for k in seen if k in wanted]
    delivered = len(set(mine))
    return {
        "part": part, "setting": setting, "sink": sink, "made": len(made), "at_stake": stake, "delivered": delivered,
        "duplicated": len(mine) - delivered, "lost": len(wanted) - delivered, "seconds": round(seconds, 2),
        "note": "",
    }  # fmt: skip


def head_kill_run(work: Path, run: int) -> list[dict]:
    """One cluster, one head killed with SIGKILL while its outputs hold a burst, then the next head; a row per sink."""
    from tests.support.head_kill import head_kill

    os.environ[DATA_ENV] = str(work / "data")  # the spools; the heads and the cluster's workers inherit it
    result = head_kill(work)
    made = list(result.made)
    alerts = sum(1 for i in made if i[0] == "alert")
    setting = f"run {run}: {len(made) - alerts} answers + {alerts} alerts"
    stake = len(result.unacked)
    queued = len(set(made) - result.webhook_at_kill)
    rows = []
    for sink, seen, note in (
        ("timeline (SQLite)", result.timeline, "exactly once (event_key)"),
        ("broker (MQTT)", result.broker, "once but what was in flight at the kill (event_key in the payload)"),
        ("webhook", result.webhook, f"once but what was in flight (Idempotency-Key); {queued} unanswered at the kill"),
    ):
        row = counted("head kill -9", setting, sink, made, seen, stake, result.recovery_s)
        row["note"] = note
        rows.append(row)
    return rows


def kill_run(work: Path, questions: int, run: int) -> list[dict]:
    """One cluster, one kill -9 after a burst; a row per sink (bus, broker, timeline)."""
    import ray

    from tests.support.mqtt_broker import MosquittoBroker
    from tests.support.mqtt_watcher import Watcher
    from tests.support.ray_cluster import ray_cluster

    os.environ[DATA_ENV] = str(work / "data")  # the spools; the cluster's workers inherit it
    clip = work / "clip.mp4"
    if not clip.exists():
        write_video(clip, size=(96, 64), fps=2.0, duration_s=16.0, scene_seconds=30.0, options={"preset": "ultrafast"})
    timeline = work / "timeline.sqlite"
    with MosquittoBroker(work) as broker, ray_cluster(["a", "b"]) as (cluster, _nodes):
        watcher = Watcher(broker.port)
        args = app_args(
            ["--ray", cluster.address, "--model", "tiny", "--max-streams", "1", "--every", "0", "--loop",
             "--max-new-tokens", "4", "--stream", f"one={clip}", "--mqtt", broker.url, "--timeline", str(timeline)]
        )  # fmt: skip
        rule = {"question": "Is anything there?", "every": 1.0, "threshold": 0.0, "on_after": 1}
        args.alert_tables = {f"w{i}": dict(rule) for i in range(WATCHES)}
        config = AppConfig.from_args(args)
        bus, seen, cond = EventBus(), [], threading.Condition()

        def record(event) -> None:
            if isinstance(event, (Alert, Answer)):
                with cond:
                    seen.append(key(to_record(event)))
                    cond.notify_all()

        bus.subscribe(record)
        publisher = start_publisher(config, {"one": list(args.alert_tables)}, bus)
        writer = start_timeline_writer(config, bus, None)
        ray.init(address=cluster.address, namespace="bench-fleet-loss", log_to_driver=False)
        coordinator = Coordinator(config, config.fleet, bus, ray)
        try:
            coordinator.start()
            victim = coordinator.hosts[coordinator.owner["one"]]
            with coordinator._lock:  # the loop drains no more (it waits for the lock to place streams)
                for i in range(questions):
                    coordinator.ask(f"question {i}: what is there?", "one")
                records = spooled(victim.name, questions + WATCHES)
                made = [key(r) for r in records]
                with cond:
                    stake = len(set(made) - set(seen))
                killed = time.monotonic()
                os.kill(victim.info.pid, signal.SIGKILL)
            with cond:
                cond.wait_for(lambda: set(made) <= set(seen), WAIT_S)
                recovered = time.monotonic() - killed
            time.sleep(3)  # a repeat, if any, would arrive now
        finally:
            coordinator.stop()
            ray.shutdown()
            for output in (publisher, writer):
                bus.unsubscribe(output)
                output.close(timeout=10)
        time.sleep(0.5)
        watcher.close()
    mqtt = [json.loads(m.payload) for m in watcher.messages if m.topic.endswith(("/events", "/answer"))]
    on_mqtt = [key(m) for m in mqtt if m.get("type") in ("alert", "answer")]
    with TimelineReader(timeline) as reader:
        rows = reader.search(None, limit=100000)
    in_timeline = [("answer", m.question) for m in rows if m.kind == "answer"]
    in_timeline += [("alert", m.alert, m.state, round(m.t_wall, 3)) for m in rows if m.kind == "alert"]
    setting = f"run {run}: {questions} answers + {WATCHES} alerts"
    return [
        counted("host kill -9", setting, "head's bus", made, seen, stake, recovered),
        counted("host kill -9", setting, "broker (MQTT)", made, on_mqtt, stake, recovered),
        counted(
            "host kill -9", setting, "timeline (SQLite)", [row_key(r) for r in records], in_timeline, stake, recovered
        ),
    ]


class SlowFile:
    """A file that takes a millisecond for every 20 lines: 20,000 lines/s at most, far below a burst."""

    def __init__(self, file) -> None:
        self.file, self.lines = file, 0

    def write(self, text: str) -> int:
        self.lines += 1
        if self.lines % 20 == 0:
            time.sleep(0.001)
        return self.file.write(text)

    def __getattr__(self, name: str):
        return getattr(self.file, name)


def log_burst(work: Path, count: int, slow: bool, never_drop: bool) -> dict:
    path = work / f"burst-{slow}-{never_drop}.jsonl"
    log = JsonlLog(path)
    if slow:
        log._file = SlowFile(log._file)
    writer = queued_log(log) if never_drop else QueuedSubscriber("event log", log)
    bus = EventBus()
    bus.subscribe(writer)
    writer.start()
    started = time.monotonic()
    for i in range(count):
        bus.publish(ErrorEvent(where="burst", message=str(i)))
    produced = time.monotonic() - started
    writer.close(timeout=600)
    log.close()
    written = [json.loads(line)["message"] for line in path.read_text().splitlines()]
    path.unlink()
    made = [str(i) for i in range(count)]
    disk = "slow file (20k lines/s)" if slow else "real file"
    queue = "never-drop log queue" if never_drop else "drop-oldest queue (before)"
    row = counted("event log burst", f"{disk}, {queue}", "JSONL log", made, written, count, produced)
    row["note"] = f"the publisher took {produced:.2f} s for {count} records"
    return row


def write_csv(rows: list[dict], path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(19, 4.5))
    for ax, part in zip(axes, ("host kill -9", "head kill -9", "event log burst"), strict=True):
        mine = [r for r in rows if r["part"] == part]
        labels = [f"{r['setting']}\n{r['sink']}" for r in mine]
        y = range(len(mine))
        for offset, (field, color) in enumerate((("made", "#888"), ("delivered", "#2a7"), ("lost", "#d33"),
                                                 ("duplicated", "#e90"))):  # fmt: skip
            ax.barh([i + offset * 0.2 for i in y], [r[field] for r in mine], 0.2, label=field, color=color)
        ax.set_yticks([i + 0.3 for i in y], labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_title(part)
        ax.set_xlabel("records" if part == "event log burst" else "events")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--runs", type=int, default=3, help="kill -9 runs of a host, and of the head (a fresh cluster each)")
    p.add_argument("--questions", type=int, default=12, help="answers asked for in each burst")
    p.add_argument("--records", type=int, default=100_000, help="records in the event log burst")
    p.add_argument("--quick", action="store_true", help="a short run (for the test): 1 run, 4 answers, 10k records")
    p.add_argument("--no-head-kill", action="store_true",
                   help="skip the head's kill (minutes; test_fleet_head_killed.py runs its scenario)")  # fmt: skip
    p.add_argument("--no-host-kill", action="store_true",
                   help="skip the host's kill (test_fleet_nothing_lost.py runs its scenario)")  # fmt: skip
    p.add_argument("--out", type=Path, default=REPO / "docs", help="folder of fleet_loss.csv and fleet_loss.png")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> list[dict]:
    args = parse_args(argv)
    if args.quick:
        args.runs, args.questions, args.records = 1, 4, 10_000
    bursts = [(False, True), (True, True), (True, False)]
    rows: list[dict] = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-fleet-loss-") as tmp,
        tqdm(
            total=(2 - args.no_head_kill - args.no_host_kill) * args.runs + len(bursts),
            desc="bench_fleet_loss",
            unit="step",
        ) as bar,
    ):
        for slow, never_drop in bursts:
            rows.append(log_burst(Path(tmp), args.records, slow, never_drop))
            bar.update()
        for run in range(1, 0 if args.no_host_kill else args.runs + 1):
            work = Path(tmp) / f"run{run}"
            work.mkdir(mode=0o700)
            rows += kill_run(work, args.questions, run)
            bar.update()
        for run in range(1, 0 if args.no_head_kill else args.runs + 1):
            work = Path(tmp) / f"head{run}"
            work.mkdir(mode=0o700)
            rows += head_kill_run(work, run)
            bar.update()
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(rows, args.out / "fleet_loss.csv")
    plot(rows, args.out / "fleet_loss.png")
    for r in rows:
        counts = " ".join(f"{name} {r[name]:>6}" for name in ("made", "at_stake", "delivered", "duplicated", "lost"))
        print(f"{r['part']:16} {r['setting']:48} {r['sink']:18} {counts} {r['seconds']:>7} s  {r['note']}")
    print(f"wrote {args.out / 'fleet_loss.csv'} and {args.out / 'fleet_loss.png'}")
    return rows


if __name__ == "__main__":
    main()
