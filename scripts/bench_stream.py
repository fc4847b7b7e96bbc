"""A simulated stream through the whole session: clips of N frames, a question every K clips.

Per round: TTFT, decode ms/token, cache tokens, KV bytes and memory, for several policies, on a
random-weight Qwen2-VL of a real size class ("small" on CPU, "qwen2-vl-2b" on a GPU).

    python scripts/bench_stream.py                          # CPU: small model, 100 rounds, 4 policies
    python scripts/bench_stream.py --size qwen2-vl-2b --device cuda --dtype bfloat16
Writes out/bench_stream.csv, out/bench_stream_summary.csv and out/bench_stream.png.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cache.attention import register_attention  # noqa: E402
from cache.config import CacheConfig  # noqa: E402
from model.session import SessionConfig, StreamingSession  # noqa: E402
from model.sized import SIZE_CLASSES, build_sized_qwen2_vl  # noqa: E402

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def run_policy(loaded, policy: str, args, progress: tqdm) -> list[dict]:
    session = StreamingSession(
        loaded, CacheConfig(policy=policy, budget=args.budget), SessionConfig(max_new_tokens=args.answer_tokens)
    )
    width, height = loaded.adapter.frame_size()
    rng = np.random.default_rng(0)
    rows, t = [], 0.0
    for round_index in range(1, args.rounds + 1):
        evict_ms = 0.0
        for _ in range(args.clips_per_question):
            frames = rng.integers(0, 256, (args.frames, height, width, 3), dtype=np.uint8)
            evict_ms += session.ingest_clip(frames, t, t + args.clip_seconds).evict_ms
            t += args.clip_seconds
        for _ in session.ask("What is happening now?"):
            pass
        m = session.last_answer
        rows.append(
            {
                "policy": policy,
                "round": round_index,
                "stream_s": t,
                "ttft_s": round(m.ttft_s, 4),
                "question_evict_ms": round(m.evict_ms, 3),
                "clip_evict_ms": round(evict_ms, 3),
                "decode_ms_per_token": round(1000 / m.decode_tokens_per_s, 3) if m.decode_tokens_per_s else None,
                "answer_tokens": m.answer_tokens,
                "cache_tokens": m.cache_tokens_end,
                "kv_bytes": m.kv_bytes,
                "device_mem_bytes": m.device_mem_bytes,
                "process_rss_bytes": m.process_rss_bytes,
            }
        )
        progress.update(1)
    return rows


def summarize(rows: list[dict], args) -> list[dict]:
    out = []
    for policy in dict.fromkeys(r["policy"] for r in rows):
        mine = [r for r in rows if r["policy"] == policy]
        early, late = mine[4], mine[-1]  # round 5 and the last round

        def ratio(key, early=early, late=late):
            return round(late[key] / early[key], 3) if early[key] else None

        out.append(
            {
                "policy": policy,
                "rounds": len(mine),
                "decode_ms_round5": early["decode_ms_per_token"],
                "decode_ms_last": late["decode_ms_per_token"],
                "decode_ratio_last_vs_round5": ratio("decode_ms_per_token"),
                "kv_mib_round5": round(early["kv_bytes"] / 2**20, 2),
                "kv_mib_last": round(late["kv_bytes"] / 2**20, 2),
                "kv_ratio_last_vs_round5": ratio("kv_bytes"),
                "median_ttft_s": round(statistics.median(r["ttft_s"] for r in mine), 4),
                "median_evict_share_of_ttft": round(
                    statistics.median(r["question_evict_ms"] / 1000 / r["ttft_s"] for r in mine), 4
                ),
            }
        )
    return out


def plot(rows: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [("decode_ms_per_token", "decode ms / token"), ("ttft_s", "TTFT s"), ("cache_tokens", "cache tokens"),
            ("kv_bytes", "KV cache MiB")]  # fmt: skip
    fig, axes = plt.subplots(1, 4, figsize=(18, 4))
    for policy in dict.fromkeys(r["policy"] for r in rows):
        mine = [r for r in rows if r["policy"] == policy]
        for ax, (key, label) in zip(axes, keys, strict=True):
            values = [(r[key] or 0) / (2**20 if key == "kv_bytes" else 1) for r in mine]
            ax.plot([r["round"] for r in mine], values, label=policy)
            ax.set_xlabel("round")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=SIZE_CLASSES, default="small")
    parser.add_argument("--policies", nargs="+", default=["full", "inf-mllm", "streaming-llm", "h2o"])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--clips-per-question", type=int, default=3, help="K: clips between questions")
    parser.add_argument("--frames", type=int, default=4, help="N: frames per clip")
    parser.add_argument("--clip-seconds", type=float, default=4.0)
    parser.add_argument("--budget", type=int, default=2048)
    parser.add_argument("--answer-tokens", type=int, default=16, help="max new tokens per answer")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", choices=DTYPES, default=None, help="default: bfloat16 on GPU, float32 on CPU")
    parser.add_argument("--out", type=Path, default=Path("out"))
    args = parser.parse_args()
    if args.rounds < 5:
        parser.error("--rounds must be >= 5 (the summary compares against round 5)")
    dtype = DTYPES[args.dtype] if args.dtype else (torch.bfloat16 if args.device != "cpu" else torch.float32)
    loaded = build_sized_qwen2_vl(args.size, register_attention(), args.device, dtype)
    print(f"random {args.size} Qwen2-VL: {loaded.num_parameters / 1e6:.1f}M parameters on {args.device} ({dtype})")
    rows = []
    with tqdm(total=args.rounds * len(args.policies), desc="bench_stream", unit="round") as progress:
        for policy in args.policies:
            progress.set_postfix(policy=policy)
            rows += run_policy(loaded, policy, args, progress)
    summary = summarize(rows, args)
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(args.out / "bench_stream.csv", rows)
    write_csv(args.out / "bench_stream_summary.csv", summary)
    title = f"random {args.size} Qwen2-VL, {args.device}, {dtype}, budget {args.budget}, {args.frames} frames/clip"
    plot(rows, args.out / "bench_stream.png", title)
    for s in summary:
        print(s)
    print(f"wrote {args.out}/bench_stream.csv, bench_stream_summary.csv, bench_stream.png")


if __name__ == "__main__":
    main()
