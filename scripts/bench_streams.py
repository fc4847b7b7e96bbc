"""Several streams, one model: answers decoded together, what each added stream costs in memory, and how many
streams this device ingests.

    python scripts/bench_streams.py --part decode                 # the reference LM (real weights), N = 1 2 4 8,
                                                                  # steps eager and compiled (torch.compile)
    python scripts/bench_streams.py --part decode --model qwen2-vl-2b
    python scripts/bench_streams.py --part memory                 # the "small" Qwen2-VL shape, N = 1 2 4 8
    python scripts/bench_streams.py --part memory --size qwen2-vl-2b --streams 1 2

Decode (per N): N streams' caches filled to the budget with different text, a question prefilled on each,
then the batched decode step of all N (cache/batch_decode.py) against N one-stream steps and against its
bandwidth bound, (weights + N x the KV of the decode span) / read bandwidth, the bandwidth measured just
before and after the steps with torch's threads (all cores by default); aggregate answer tokens/s; the
standing question on all N streams (question prefill + `--answer-tokens` tokens each), batched against one
stream after another.
Each `--decode` mode times both sides the same way: "eager", or "compiled" (the one-stream step and the
batched step both compiled, as `--compile` does in the app; compiling happens in the untimed warm-up).
Writes out/bench_streams_decode.csv and .png.

Memory:
Per N (streams in one process, one model): every stream is fed clips until its cache holds the budget and its
host store holds `--store-mb`; then the process RSS, against the computed bound of N streams
(app/admission.py: device KV + host store) and against N separate processes (N x the RSS of one process
with one stream: each separate process also holds the weights). Per clip: its prefill time at the budget,
so how many streams of 1 frame/s and `--clip-seconds` clips this device keeps up with (clip_seconds /
prefill time). Random weights of a real size class (model/sized.py): timings and memory, not answers.
Writes out/bench_streams.csv and out/bench_streams.png.
"""

from __future__ import annotations

import argparse
import csv
import gc
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.admission import KvShape, stream_cost  # noqa: E402
from cache.attention import register_attention  # noqa: E402
from cache.batch_decode import BatchDecoder  # noqa: E402
from cache.bounded_cache import BoundedCache  # noqa: E402
from cache.config import CacheConfig  # noqa: E402
from cache.cpu.layouts import tune_linear_layouts  # noqa: E402
from cache.runner import CachedRunner  # noqa: E402
from model.resources import process_rss_bytes  # noqa: E402
from model.session import SessionConfig, StreamingSession  # noqa: E402
from model.sized import SIZE_CLASSES, build_sized_qwen2_vl  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--part", choices=["decode", "memory"], nargs="+", default=["decode", "memory"])
    p.add_argument("--model", choices=["reference", "qwen2-vl-2b"], default="reference", help="decode part's model")
    p.add_argument("--steps", type=int, default=24, help="decode steps timed per measurement (median)")
    p.add_argument(
        "--decode", choices=["eager", "compiled"], nargs="+", default=["eager", "compiled"], help="decode part's modes"
    )
    p.add_argument("--answer-tokens", type=int, default=32, help="tokens per answer (standing question timing)")
    p.add_argument("--size", choices=list(SIZE_CLASSES), default="small", help="memory part's model shape")
    p.add_argument("--streams", type=int, nargs="+", default=[1, 2, 4, 8], help="values of N")
    p.add_argument("--budget", type=int, default=2048, help="tokens per stream's device cache")
    p.add_argument("--recall", type=int, default=256, help="recall tokens per question (sizes the device buffers)")
    p.add_argument("--store-mb", type=float, default=64.0, help="host store bound per stream, MiB")
    p.add_argument("--clip-seconds", type=float, default=4.0, help="stream seconds per clip (1 frame/s)")
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default, all cores)")
    p.add_argument("--out", type=Path, default=Path("out"), help="folder for the CSV and the plot")
    return p.parse_args(argv)


def fill(session: StreamingSession, frames: int, size: tuple[int, int], clip_seconds: float, store_bytes: int):
    """Feeds random clips until the cache is at its budget and the store at its bound; prefill seconds of the
    clips fed once the cache was full (the steady state of a long stream)."""
    rng = np.random.default_rng(0)
    width, height = size
    t, at_budget = 0.0, []
    while True:
        clip = rng.integers(0, 256, (frames, height, width, 3), dtype=np.uint8)
        full = session.cache.get_seq_length() >= session.cache_config.budget - 64
        metrics = session.ingest_clip(clip, t, t + clip_seconds)
        t += clip_seconds
        if full:
            at_budget.append(metrics.prefill_s)
        store = session.cache.store
        if full and (store is None or store.bytes + 2 * (store.bytes / max(store.tokens, 1)) * 256 >= store_bytes):
            return at_budget


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    if "decode" in args.part:
        decode_part(args)
    if "memory" in args.part:
        memory_part(args)


# -- decode: N streams' answers as one batched step -----------------------------------------------------


def prefilled_runner(model, args, seed: int, compile: bool = False) -> CachedRunner:
    """A stream at its budget (random text of its own) with a question prefilled: ready to decode an answer."""
    cache = BoundedCache.for_model(model, CacheConfig(budget=args.budget, recall=args.recall))
    runner = CachedRunner(model, cache, compile_decode=compile)
    gen = torch.Generator().manual_seed(seed)
    vocab = model.config.vocab_size
    runner.prefill(input_ids=torch.randint(100, vocab - 1, (1, args.budget + 512), generator=gen))
    ask(runner, seed, room=2 * args.steps + 4)  # the timed steps of both measurements fit in the headroom
    return runner


def ask(runner: CachedRunner, seed: int, room: int) -> int:
    """Prefills a 32-token question, leaving `room` tokens for the answer; returns its first answer token."""
    gen = torch.Generator().manual_seed(10_000 + seed)
    question = torch.randint(100, runner.model.config.vocab_size - 1, (1, 32), generator=gen)
    logits = runner.prefill(input_ids=question, evict_to=runner.cache.config.budget - room)
    return int(logits.argmax(-1))


def median_ms(step, steps: int) -> float:
    step()  # warm-up (the batch pool is made at the first batched step)
    times = []
    for _ in range(steps):
        started = time.perf_counter()
        step()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def decode_part(args) -> None:
    from scripts.bench_decode import build_model, kv_bytes_per_token, read_bandwidth, weight_bytes

    model = build_model(args.model)
    tune_linear_layouts(model)  # as the app does at start on a CPU
    weights, kv_token = weight_bytes(model), kv_bytes_per_token(model)
    span = args.budget + args.recall + 1
    rows = []
    runs = [(mode, n) for mode in args.decode for n in args.streams]
    for mode, n in tqdm(runs, desc=f"decode, {args.model}", unit="run"):
        one_ms, batched_ms, bandwidth, answers = measure_streams(model, n, args, read_bandwidth, mode == "compiled")
        bound_ms = (weights + n * kv_token * span) / bandwidth * 1000
        rows.append(
            {
                "model": args.model,
                "decode": mode,
                "streams": n,
                "threads": torch.get_num_threads(),
                "one_stream_step_ms": round(one_ms, 2),
                "n_x_one_ms": round(n * one_ms, 2),
                "batched_step_ms": round(batched_ms, 2),
                "bound_ms": round(bound_ms, 2),
                "batched_vs_bound": round(batched_ms / bound_ms, 3),
                "read_gb_s": round(bandwidth / 1e9, 2),
                "one_stream_tokens_s": round(1000 / one_ms, 1),
                "aggregate_tokens_s": round(n * 1000 / batched_ms, 1),
                "aggregate_vs_one": round(n * one_ms / batched_ms, 2),
                "answer_all_sequential_s": round(answers[0], 3),
                "answer_all_batched_s": round(answers[1], 3),
            }
        )
        tqdm.write(str(rows[-1]))
        gc.collect()
    write_csv(rows, args.out / "bench_streams_decode.csv")
    plot_decode(rows, args.out / "bench_streams_decode.png")


def measure_streams(
    model, n: int, args, read_bandwidth, compile: bool
) -> tuple[float, float, float, tuple[float, float]]:
    """One-stream step ms, batched step ms (N rows), read bandwidth (bytes/s) and the answer times, for N
    fresh streams at their budget."""
    runners = [prefilled_runner(model, args, seed, compile) for seed in range(n)]
    batch = BatchDecoder(runners)
    if compile and not (runners[0].decoder.compiled and batch.compiled):
        raise SystemExit("torch.compile is not available here: run with --decode eager")
    before = read_bandwidth()[0]
    # batched first: a pooled stream's buffers have the pool's strides, which its own compiled step is traced for
    # at its warm-up here (as in the app after the first batched answer), not inside the timed answers below
    batched_ms = median_ms(lambda: batch.step([1000] * n), args.steps) if n > 1 else None
    one_ms = median_ms(lambda: runners[0].decode_step(1000), args.steps)
    batched_ms = batched_ms or one_ms
    # probed before and after the steps: the README's VM reads 30-60 GB/s depending on its neighbours, for minutes
    bandwidth = (before + read_bandwidth()[0]) / 2
    return one_ms, batched_ms, bandwidth, answer_times(runners, batch, args)


def answer_times(runners: list[CachedRunner], batch: BatchDecoder, args) -> tuple[float, float]:
    """The standing question on every stream: question prefill + answer tokens, one stream after another,
    then with the answers' decode steps batched. Greedy tokens are fed back, as in an answer."""
    started = time.perf_counter()
    for seed, runner in enumerate(runners):
        token = ask(runner, seed, args.answer_tokens)
        for _ in range(args.answer_tokens - 1):
            token = int(runner.decode_step(token).argmax(-1))
    sequential = time.perf_counter() - started
    started = time.perf_counter()
    tokens = [ask(runner, seed, args.answer_tokens) for seed, runner in enumerate(runners)]
    for _ in range(args.answer_tokens - 1):
        tokens = [int(logits.argmax(-1)) for logits in batch.step(tokens)]
    return sequential, time.perf_counter() - started


def plot_decode(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for mode, style in (("eager", "--"), ("compiled", "-")):
        part = [r for r in rows if r["decode"] == mode]
        if not part:
            continue
        n = [r["streams"] for r in part]
        left.plot(n, [r["batched_step_ms"] for r in part], "o" + style, label=f"batched step, {mode}")
        left.plot(n, [r["n_x_one_ms"] for r in part], "s" + style, alpha=0.6, label=f"N x one-stream step, {mode}")
        right.plot(n, [r["aggregate_tokens_s"] for r in part], "o" + style, label=f"batched, all streams, {mode}")
        right.plot(n, [r["one_stream_tokens_s"] for r in part], "s" + style, alpha=0.6, label=f"one stream, {mode}")
    first = [r for r in rows if r["decode"] == rows[0]["decode"]]
    left.plot([r["streams"] for r in first], [r["bound_ms"] for r in first], "k:", label="bandwidth bound")
    left.set_ylabel("ms per step")
    right.set_ylabel("answer tokens / s")
    for ax in (left, right):
        ax.set_xlabel("streams")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"{rows[0]['model']}: answers of N streams decoded together ({rows[0]['threads']} threads)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write_csv(rows: list[dict], path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {path}")


# -- memory: what each added stream costs ---------------------------------------------------------------


def memory_part(args) -> None:
    loaded = build_sized_qwen2_vl(args.size, register_attention())
    cache = CacheConfig(budget=args.budget, recall=args.recall, store_bytes=int(args.store_mb * 2**20))
    session_config = SessionConfig()
    cost = stream_cost(KvShape.of_model(loaded.model, loaded.adapter.position_dims), cache, session_config.chunk_size)
    bound = cost.device_bytes + cost.host_bytes
    frames = max(1, round(args.clip_seconds))  # 1 frame per second of stream
    gc.collect()
    weights_rss = process_rss_bytes()
    rows, prefill, sessions = [], [], []
    with tqdm(total=max(args.streams), desc="filling streams", unit="stream") as bar:
        for n in sorted(args.streams):  # streams are added one by one; RSS is read at each N
            while len(sessions) < n:
                sessions.append(StreamingSession(loaded, cache, session_config))
                prefill += fill(sessions[-1], frames, loaded.adapter.frame_size(), args.clip_seconds, cost.host_bytes)
                bar.update(1)
            gc.collect()
            rss = process_rss_bytes()
            rows.append({"streams": n, "rss_bytes": rss, "weights_rss_bytes": weights_rss, "bound_bytes": bound})
    one = rows[0]["rss_bytes"] if rows[0]["streams"] == 1 else None
    per_clip = statistics.median(prefill)
    for row in rows:
        n = row["streams"]
        row["added_per_stream_bytes"] = round((row["rss_bytes"] - weights_rss) / n)
        row["added_vs_bound"] = round(row["added_per_stream_bytes"] / bound, 3)
        row["separate_processes_bytes"] = n * one if one else None
        row["one_process_vs_separate"] = round(row["rss_bytes"] / (n * one), 3) if one else None
        row["clip_prefill_s"] = round(per_clip, 3)
        row["streams_kept_up"] = round(args.clip_seconds / per_clip, 2)
    write_csv(rows, args.out / "bench_streams.csv")
    plot(rows, args.out / "bench_streams.png", f"{args.size} shape, budget {args.budget}, store {args.store_mb:g} MiB")
    for row in rows:
        print(
            f"N={row['streams']}: RSS {row['rss_bytes'] / 2**20:.0f} MiB (weights and runtime "
            f"{weights_rss / 2**20:.0f}), added {row['added_per_stream_bytes'] / 2**20:.1f} MiB a stream = "
            f"{row['added_vs_bound']:.2f} x its bound {bound / 2**20:.1f} MiB; N processes "
            f"{(row['separate_processes_bytes'] or 0) / 2**20:.0f} MiB ({row['one_process_vs_separate']} x)"
        )
    print(f"clip prefill at the budget: {per_clip:.2f} s -> {args.clip_seconds / per_clip:.2f} streams kept up with")


def plot(rows: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = [r["streams"] for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(n, [r["rss_bytes"] / 2**20 for r in rows], "o-", label="one process, N streams")
    if rows[0]["separate_processes_bytes"]:
        ax.plot(n, [r["separate_processes_bytes"] / 2**20 for r in rows], "s--", label="N processes, one stream each")
    ax.plot(n, [(r["weights_rss_bytes"] + k * r["bound_bytes"]) / 2**20 for r, k in zip(rows, n, strict=True)],
            ":", label="weights + N x computed bound")  # fmt: skip
    ax.set_xlabel("streams")
    ax.set_ylabel("MiB")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
