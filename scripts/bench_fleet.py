"""The fleet's costs on one machine: a real Ray cluster of several nodes on 127.0.0.1 (ray.cluster_utils, as the
tests use), tiny random models, a real PostgreSQL (started here unless --timeline names one).

Measured:
- place: `Coordinator.start()` for N streams on the hosts: the hosts' start (the model loads) and the placement of
  every stream (its source opened, its first capture started), from the events' clocks;
- failover: a node removed -> Ray's word that its host died -> the moved stream placed elsewhere -> its first clip
  there (the cache rebuilt from the feed);
- question: a person's question until its answer starts, asked through the coordinator (a Ray call to the host,
  the answer's events drained back every poll) and asked of the same assistant in this process (a `FleetHost`
  without Ray): the fleet's overhead is the difference;
- memory: the resident memory of Ray's own processes per node (raylet; the head's GCS and services) and of one
  host actor with its model;
- events: events per second from a host's outbox through Ray onto the head's bus, and through the PostgreSQL
  timeline writer after it.

Writes out/bench_fleet.csv and out/bench_fleet.png. Timings on a 2-core machine with every node on it are an
upper bound of what separate boxes pay (they share nothing but the network).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.update({"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"})  # loopback only

import psutil  # noqa: E402
from tqdm import tqdm  # noqa: E402

from app.cli import parse_args as app_args  # noqa: E402
from app.config import AppConfig  # noqa: E402
from bus import Answer, AnswerStart, AnswerStats, ClipEvent, Event, EventBus, Status, StatusKind  # noqa: E402
from capture.synth import write_video  # noqa: E402
from fleet.coordinator import Coordinator  # noqa: E402
from fleet.host import FleetHost  # noqa: E402
from fleet.wire import from_wire, to_wire  # noqa: E402
from scripts.bench_streams import write_csv  # noqa: E402
from timeline import TimelineConfig, TimelineWriter  # noqa: E402


class Recorder:
    """The head's bus as a list of (monotonic time, event), with waits."""

    def __init__(self) -> None:
        self.seen: list[tuple[float, Event]] = []
        self.cond = threading.Condition()

    def __call__(self, event: Event) -> None:
        with self.cond:
            self.seen.append((time.monotonic(), event))
            self.cond.notify_all()

    def wait(self, match, timeout: float = 300.0, after: int = 0) -> float:
        """When the first matching event (from index `after`) arrived."""

        def found():
            return next((t for t, e in self.seen[after:] if match(e)), None)

        with self.cond:
            if not self.cond.wait_for(lambda: found() is not None, timeout):
                raise TimeoutError(f"no matching event within {timeout} s")
            return found()


def fleet_config(address: str, video: Path, streams: int, every: float = 0.0) -> AppConfig:
    argv = ["--ray", address, "--model", "tiny", "--every", str(every), "--loop", "--timeline", ""]
    for i in range(streams):
        argv += ["--stream", f"s{i}={video}"]
    return AppConfig.from_args(app_args(argv))


def start_fleet(ray, address: str, video: Path, streams: int) -> tuple[Coordinator, Recorder, float]:
    bus, recorder = EventBus(), Recorder()
    bus.subscribe(recorder)
    config = fleet_config(address, video, streams)
    coordinator = Coordinator(config, config.fleet, bus, ray)
    t0 = time.monotonic()
    coordinator.start()
    return coordinator, recorder, t0


def measure_place(ray, cluster, video: Path, counts: list[int], bar: tqdm) -> list[dict]:
    rows = []
    for n in counts:
        coordinator, recorder, t0 = start_fleet(ray, cluster.address, video, n)
        joined = [t for t, e in recorder.seen if isinstance(e, Status) and e.kind is StatusKind.HOST_JOINED]
        placed = [t for t, e in recorder.seen if isinstance(e, Status) and e.kind is StatusKind.STREAM_PLACED]
        coordinator.stop()
        rows.append({"measure": "hosts_start_s", "setting": f"{n} streams", "value": round(max(joined) - t0, 3)})
        rows.append({"measure": "place_s", "setting": f"{n} streams", "value": round(max(placed) - max(joined), 3)})
        bar.update()
    return rows


def measure_failover(ray, cluster, nodes, video: Path, bar: tqdm) -> list[dict]:
    coordinator, recorder, _ = start_fleet(ray, cluster.address, video, 3)
    try:
        victim = coordinator.hosts[coordinator.owner["s1"]]
        mark = len(recorder.seen)
        t0 = time.monotonic()
        cluster.remove_node(next(n for n in nodes if n.node_id == victim.node.node_id))
        lost = recorder.wait(lambda e: isinstance(e, Status) and e.kind is StatusKind.HOST_LOST, after=mark)
        placed = recorder.wait(
            lambda e: isinstance(e, Status) and e.stream == "s1" and e.kind is StatusKind.STREAM_PLACED, after=mark
        )
        clip = recorder.wait(lambda e: isinstance(e, ClipEvent) and e.stream == "s1", after=mark)
    finally:
        coordinator.stop()
    bar.update()
    return [
        {"measure": "failover_lost_s", "setting": "node removed -> host lost", "value": round(lost - t0, 3)},
        {"measure": "failover_placed_s", "setting": "node removed -> placed again", "value": round(placed - t0, 3)},
        {"measure": "failover_first_clip_s", "setting": "node removed -> first clip", "value": round(clip - t0, 3)},
    ]


def measure_question(ray, cluster, video: Path, repeats: int, bar: tqdm) -> list[dict]:
    """Ask -> answer_start, through the fleet and in this process, after the stream's first clips."""
    coordinator, recorder, _ = start_fleet(ray, cluster.address, video, 1)
    try:
        fleet_s = ask_times(coordinator.ask, recorder, repeats, bar)
    finally:
        coordinator.stop()
    config = fleet_config("auto", video, 1)
    host = FleetHost(config, "local")
    local = Recorder()
    host.bus.subscribe(local)
    try:
        host.start_stream(config.streams[0])
        local_s = ask_times(host.ask, local, repeats, bar)
    finally:
        host.stop()
    return [
        {"measure": "question_to_answer_start_ms", "setting": "through the fleet", "value": _ms(fleet_s)},
        {"measure": "question_to_answer_start_ms", "setting": "same process", "value": _ms(local_s)},
    ]


def ask_times(ask, recorder: Recorder, repeats: int, bar: tqdm) -> list[float]:
    """Seconds from asking stream s0 (once it has clips) to its answer's start, each answer awaited whole."""
    recorder.wait(lambda e: isinstance(e, ClipEvent) and e.index >= 1)
    times = []
    for i in range(repeats):
        mark = len(recorder.seen)
        t0 = time.monotonic()
        ask(f"question {i}?", "s0")
        times.append(recorder.wait(lambda e: isinstance(e, AnswerStart), after=mark) - t0)
        recorder.wait(lambda e: isinstance(e, Answer), after=mark)
        bar.update()
    return times


def measure_memory(ray, cluster, video: Path, bar: tqdm) -> list[dict]:
    coordinator, _, _ = start_fleet(ray, cluster.address, video, 1)
    try:
        raylets, services, hosts = [], [], []
        for proc in psutil.process_iter(["name", "cmdline", "memory_info"]):
            name, cmd = proc.info["name"] or "", " ".join(proc.info["cmdline"] or [])
            rss = proc.info["memory_info"].rss if proc.info["memory_info"] else 0
            if name == "raylet":
                raylets.append(rss)
            elif "FleetHost" in name or "FleetHost" in cmd:
                hosts.append(rss)
            elif name == "gcs_server" or "ray/dashboard" in cmd or "ray/_private" in cmd or "ray/autoscaler" in cmd:
                services.append(rss)
    finally:
        coordinator.stop()
    bar.update()
    return [
        {"measure": "ray_rss_mib", "setting": "raylet per node", "value": round(_median(raylets) / 2**20, 1)},
        {"measure": "ray_rss_mib", "setting": "head services (GCS ...)", "value": round(sum(services) / 2**20, 1)},
        {"measure": "ray_rss_mib", "setting": "host actor (tiny model)", "value": round(_median(hosts) / 2**20, 1)},
    ]


class Flood:
    """A stand-in host whose outbox holds `n` answers, drained as the coordinator drains a host."""

    def drain(self, n: int) -> list[dict]:
        stats = [AnswerStats(round=i, question="what is there?", answer=f"a red car {i}") for i in range(n)]
        return [to_wire(Answer(stream=f"s{i % 8}", stats=s)) for i, s in enumerate(stats)]


def measure_events(ray, timeline_target, total: int, batch: int, bar: tqdm) -> list[dict]:
    flood = ray.remote(Flood).options(num_cpus=0).remote()
    bus, count = EventBus(), [0]
    bus.subscribe(lambda event: count.__setitem__(0, count[0] + 1))
    t0 = time.monotonic()
    for _ in range(total // batch):
        for item in ray.get(flood.drain.remote(batch)):
            bus.publish(from_wire(item))
    bus_rate = count[0] / (time.monotonic() - t0)
    writer = TimelineWriter(TimelineConfig(timeline_target, queue_size=total + 1))
    writer.start()
    t0 = time.monotonic()
    for item in ray.get(flood.drain.remote(total)):
        writer(from_wire(item))
    writer.close(timeout=600.0)
    timeline_rate = writer.written / (time.monotonic() - t0)
    ray.kill(flood)
    bar.update()
    return [
        {"measure": "events_per_s", "setting": "host outbox -> Ray -> head bus", "value": round(bus_rate)},
        {"measure": "events_per_s", "setting": "... -> PostgreSQL timeline", "value": round(timeline_rate)},
    ]


def _ms(seconds: list[float]) -> float:
    return round(1000 * statistics.median(seconds), 2)


def _median(values: list[float]) -> float:
    return round(statistics.median(values), 4) if values else float("nan")


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = [
        ("place_s", "hosts_start_s"),
        ("failover_lost_s", "failover_placed_s", "failover_first_clip_s"),
        ("question_to_answer_start_ms",),
        ("ray_rss_mib",),
    ]
    titles = ["start and placement (s)", "failover after a node is lost (s)", "question -> answer starts (ms)",
              "resident memory (MiB)"]  # fmt: skip
    fig, axes = plt.subplots(1, len(groups), figsize=(18, 4.5))
    for ax, measures, title in zip(axes, groups, titles, strict=True):
        picked = [r for r in rows if r["measure"] in measures]
        labels = [f"{r['measure'].removesuffix('_s').removesuffix('_ms')}\n{r['setting']}" for r in picked]
        ax.barh(range(len(picked)), [r["value"] for r in picked], color="tab:blue")
        ax.set_yticks(range(len(picked)), labels, fontsize=7)
        ax.set_title(title, fontsize=9)
    fig.suptitle("fleet on one machine: Ray test cluster on 127.0.0.1, tiny models (scripts/bench_fleet.py)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--streams", type=int, nargs="+", default=[2, 4, 8], help="stream counts to place")
    p.add_argument("--repeats", type=int, default=5, help="questions asked each way")
    p.add_argument("--events", type=int, default=20000, help="events pushed through the bus and the timeline")
    p.add_argument("--timeline", help="postgresql://... to write (default: a PostgreSQL started here)")
    p.add_argument("--out", type=Path, default=Path("out"))
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    import ray

    from tests.support.ray_cluster import add_host_node, ray_cluster

    video = Path(tempfile.mkdtemp(prefix="bench-fleet-")) / "feed.mp4"
    write_video(video, size=(96, 64), fps=2.0, duration_s=16.0, scene_seconds=30.0, options={"preset": "ultrafast"})
    rows: list[dict] = []
    steps = len(args.streams) + 1 + 2 * args.repeats + 1 + 1
    with tqdm(total=steps, desc="bench_fleet", unit="step") as bar, ray_cluster(["a", "b"]) as (cluster, nodes):
        ray.init(address=cluster.address, namespace="bench-fleet", log_to_driver=False, logging_level="WARNING")
        rows += measure_place(ray, cluster, video, args.streams, bar)
        rows += measure_question(ray, cluster, video, args.repeats, bar)
        rows += measure_memory(ray, cluster, video, bar)
        rows += measure_events(ray, *_timeline(args), args.events, 500, bar)
        nodes.append(add_host_node(cluster, "c"))
        cluster.wait_for_nodes()
        rows += measure_failover(ray, cluster, nodes, video, bar)
        ray.shutdown()
    csv_path, png_path = args.out / "bench_fleet.csv", args.out / "bench_fleet.png"
    write_csv(rows, csv_path)
    plot(rows, png_path)
    for row in rows:
        print(f"{row['measure']:>28}  {row['setting']:<34} {row['value']}")
    print(f"wrote {png_path}")
    return 0


def _timeline(args: argparse.Namespace):
    """The PostgreSQL target to write: --timeline, or a database of a server started for this run."""
    if args.timeline:
        from timeline import timeline_location

        return (timeline_location(args.timeline, None),)
    from tests.support.postgres_server import PostgresServer

    server = PostgresServer().__enter__()
    import atexit

    atexit.register(server.__exit__, None, None, None)
    return (server.create_database("bench"),)


if __name__ == "__main__":
    sys.exit(main())
