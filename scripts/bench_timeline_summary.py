"""How long a period's summary and recap take on a busy timeline, SQLite and PostgreSQL.

A generated day of a busy deployment (default: 100,000 rows, 8 streams, 20 watches): every stream answers its
standing question every few seconds (the answer changing now and then), watches alert and end at random, streams
drop and come back. The rows are written through the timeline's own writer (`TimelineStore`), then read back
through `TimelineReader` the way the API and the terminal do: the whole day's summary (per watch and stream), the
same per hour, one watch's, and the recap of the last hour and of the whole day (50 lines). Each query runs
`--repeats` times on a fresh reader; the table gives the median and the worst. The goal (issue 49): a day's
summary in at most 100 ms.

PostgreSQL: the table is vacuumed and analysed once filled (what autovacuum does to a table that grew; without
it the planner has no statistics and index-only scans read the heap). The script starts its own server (Debian's
PostgreSQL 15, as the `postgres` user, a temporary folder, a free loopback port; tests/support/postgres_server.py)
and always stops it; `--backends sqlite` skips it.
Writes docs/timeline_summary.csv and docs/timeline_summary.png (--out).
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tqdm import tqdm

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from timeline import TimelineConfig, TimelineReader  # noqa: E402
from timeline.period import DAY_S, Period  # noqa: E402
from timeline.store import Row, TimelineStore  # noqa: E402

COLUMNS = ["backend", "query", "rows", "streams", "watches", "repeats", "median_ms", "max_ms", "result", "cpu"]
ANSWERS = ["an empty driveway", "a car in the driveway", "a person at the door", "a dog on the lawn"]
BATCH = 500


def busy_rows(rows: int, streams: int, watches: int, until: float, seed: int = 0) -> list[Row]:
    """A day of `streams` cameras up to `until`: about 70 % answers, 28 % alert begins and ends, the rest stream
    drops and reconnections. Deterministic for a seed."""
    rng = random.Random(seed)
    names = [f"cam{i}" for i in range(streams)]
    watch_of = [(names[i % streams], f"watch{i}") for i in range(watches)]
    alert_pairs = int(rows * 0.14)
    gaps = max(int(rows * 0.01), streams)
    answers = rows - 2 * alert_pairs - 2 * gaps
    since = until - DAY_S
    out: list[Row] = []
    for i in range(answers):
        stream = names[i % streams]
        t = since + DAY_S * i / answers
        text = ANSWERS[int(t / 600 + i % streams) % len(ANSWERS)]  # changes every ten minutes or so
        out.append(Row(kind="answer", t_wall=t, stream=stream, start_s=t - since - 4, end_s=t - since,
                       question="What is on screen?", text=text, who="standing", round=i // streams))  # fmt: skip
    for i in range(alert_pairs):
        stream, alert = watch_of[i % watches]
        begin = since + rng.uniform(0, DAY_S - 600)
        length = rng.uniform(2, 300)
        alert_id = f"{stream}-{alert}-{i}"
        common = dict(stream=stream, question=f"Is there a {alert}?", who="watch", alert=alert, alert_id=alert_id)
        out.append(Row(kind="alert", t_wall=begin, start_s=begin - since, end_s=begin - since, text=f"{alert} began",
                       state="begin", p_yes=0.9, **common))  # fmt: skip
        if i % 97:  # a few stay open
            end = begin + length
            text = f"{alert} ended after {length:.0f} s"
            out.append(Row(kind="alert", t_wall=end, start_s=begin - since, end_s=end - since, text=text,
                           state="end", duration_s=length, **common))  # fmt: skip
    for i in range(gaps):
        stream = names[i % streams]
        down = since + rng.uniform(0, DAY_S - 120)
        for t, state in ((down, "reconnect"), (down + rng.uniform(5, 120), "reconnected")):
            out.append(Row(kind="stream", t_wall=t, stream=stream, start_s=t - since, end_s=t - since,
                           text=state, state=state))  # fmt: skip
    out.sort(key=lambda row: row.t_wall)
    return out


def fill(location, rows: list[Row], now: float) -> None:
    store = TimelineStore(TimelineConfig(location, max_bytes=8 * 1024**3, check_every=10**9))
    for start in tqdm(range(0, len(rows), BATCH), desc="writing", unit="batch", leave=False):
        store.write(rows[start : start + BATCH], now=now)
    store.db.close()
    if not isinstance(location, Path):  # PostgreSQL: the statistics and visibility map autovacuum keeps, made now
        import psycopg

        with psycopg.connect(**location.connect_kwargs(), autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE moments")


def queries(now: float) -> dict[str, object]:
    day, hour = Period(now - DAY_S, now), Period(now - 3600, now)
    return {
        "summary, day": lambda r: r.summary(day),
        "summary, day per hour": lambda r: r.summary(day, bucket="hour"),
        "summary, one watch": lambda r: r.summary(day, stream="cam0", watch="watch0"),
        "recap, last hour": lambda r: r.recap(hour),
        "recap, day": lambda r: r.recap(day),
    }


def describe(result) -> str:
    if hasattr(result, "watches"):
        return f"{len(result.watches)} watches, {sum(w.began for w in result.watches)} alerts"
    return f"{len(result.lines)} lines, {result.left_out} left out"


def measure(backend: str, location, args, now: float) -> list[dict]:
    out = []
    for name, run in tqdm(queries(now).items(), desc=backend, unit="query"):
        times, result = [], None
        for _ in range(args.repeats):
            with TimelineReader(location) as reader:
                start = time.perf_counter()
                result = run(reader)
                times.append((time.perf_counter() - start) * 1000)
        out.append(
            {
                "backend": backend,
                "query": name,
                "rows": args.rows,
                "streams": args.streams,
                "watches": args.watches,
                "repeats": args.repeats,
                "median_ms": round(statistics.median(times), 1),
                "max_ms": round(max(times), 1),
                "result": describe(result),
                "cpu": cpu_name(),
            }
        )
    return out


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def postgres_location(stack):
    from tests.support.postgres_server import PostgresServer

    server = stack.enter_context(PostgresServer())
    return server.create_database("summary_bench")


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(row["query"] for row in rows))
    backends = list(dict.fromkeys(row["backend"] for row in rows))
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / len(backends)
    for i, backend in enumerate(backends):
        values = [next((r["median_ms"] for r in rows if r["backend"] == backend and r["query"] == n), 0) for n in names]
        ax.bar([j + i * width for j in range(len(names))], values, width, label=backend)
    ax.axhline(100, color="red", linestyle="--", label="goal: 100 ms")
    ax.set_xticks([j + width * (len(backends) - 1) / 2 for j in range(len(names))], names, rotation=15, fontsize=8)
    ax.set_ylabel("median ms")
    ax.set_title(f"a day of {rows[0]['rows']:,} rows, {rows[0]['streams']} streams, {rows[0]['watches']} watches")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--streams", type=int, default=8)
    p.add_argument("--watches", type=int, default=20)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--backends", nargs="+", default=["sqlite", "postgres"], choices=["sqlite", "postgres"])
    p.add_argument("--out", type=Path, default=REPO / "docs")
    args = p.parse_args(argv)
    if args.rows < 100 or args.streams < 1 or args.watches < 1 or args.repeats < 1:
        p.error("--rows must be >= 100, --streams, --watches and --repeats >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    import contextlib

    args = parse_args(argv)
    now = time.time()
    rows = busy_rows(args.rows, args.streams, args.watches, now)
    results: list[dict] = []
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as stack:
        for backend in args.backends:
            location = Path(folder) / "timeline.sqlite" if backend == "sqlite" else postgres_location(stack)
            fill(location, rows, now)
            results += measure(backend, location, args, now)
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "timeline_summary.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(results)
    plot(results, args.out / "timeline_summary.png")
    load = os.getloadavg()[0]
    print(f"{'backend':<9} {'query':<24} {'median ms':>10} {'max ms':>8}  result   ({cpu_name()}, load {load:.1f})")
    for row in results:
        print(f"{row['backend']:<9} {row['query']:<24} {row['median_ms']:>10} {row['max_ms']:>8}  {row['result']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
