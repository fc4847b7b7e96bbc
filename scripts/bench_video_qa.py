"""Video QA against ground truth: the demo model (`--model demo`) on long generated streams, every memory side by side.

    python scripts/bench_video_qa.py                          # 6 streams of 12 minutes, every setup: ~25 min, 2 cores
    python scripts/bench_video_qa.py --streams 1 --setups simplestream default      # a quick look

Each stream (quality/video_plan.py) runs 180 clips of 4 s (1 frame/s) through a streaming session and asks its
questions when the stream reaches them: about now, and 1, 3 and 10 minutes after a scene to remember (did it
appear, what colour was it, how many times), each answer scored against the generator's ground truth. The budget
is 16 times smaller than the stream. Setups, on the same streams and questions:

    full             no eviction (the whole stream: far past the 8 clips the demo model was trained on)
    window           the newest tokens only          simplestream   the last 4 frames only (a fresh conversation)
    streaming-llm    sinks + newest                  h2o, snapkv    accumulated / windowed attention
    inf-mllm         the default policy, no recall   default        inf-mllm + recall (the app's defaults)
    no-drop          default, every clip whole       no-pin         default, the current picture not pinned
    int8             default on the int8 model

Watches ("Is there a person?", "Is there a <kind>?") are checked after every clip under the default setup,
`shared` and window, and scored against the generator's intervals: precision and recall per clip, and how many
clips late a begin and an end come. Writes the per-question CSV, a summary CSV, the Markdown table and the
accuracy-by-delay plot.
"""

from __future__ import annotations

import argparse
import math
import platform
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a file from anywhere
from cache.attention import register_attention  # noqa: E402
from cache.config import CacheConfig  # noqa: E402
from capture.scenes import render  # noqa: E402
from model.change import ChangeConfig  # noqa: E402
from model.config import ModelConfig  # noqa: E402
from model.loading import load_model  # noqa: E402
from model.session import StreamingSession  # noqa: E402
from model.session_config import SessionConfig  # noqa: E402
from quality.report import write_csv  # noqa: E402
from quality.video_plan import long_stream  # noqa: E402
from quality.video_qa import correct, matches  # noqa: E402

CLIP_S, FPS = 4.0, 1.0
FRAME = (280, 168)  # rendered 16:9, twice what the demo model reads (140x84)
ANSWER_TOKENS = 24


@dataclass(frozen=True)
class Setup:
    name: str
    policy: str = "inf-mllm"
    recall: int = 128
    drop_unchanged: bool = True
    pin_picture: bool = True
    int8: bool = False
    last_frames_only: bool = False
    unbounded: bool = False
    selection: str = "per-head"


DEFAULT = Setup("default")
WATCH_SETUPS = ("default", "shared", "window")  # the setups whose watches are checked after every clip
SETUPS = {
    s.name: s
    for s in (
        Setup("full", policy="full", recall=0, unbounded=True),
        Setup("window", policy="window", recall=0),
        Setup("simplestream", policy="full", recall=0, last_frames_only=True, drop_unchanged=False),
        Setup("streaming-llm", policy="streaming-llm", recall=0),
        Setup("h2o", policy="h2o", recall=0),
        Setup("snapkv", policy="snapkv", recall=0),
        Setup("inf-mllm", recall=0),
        DEFAULT,
        replace(DEFAULT, name="no-drop", drop_unchanged=False),
        replace(DEFAULT, name="no-pin", pin_picture=False),
        replace(DEFAULT, name="int8", int8=True),
        replace(DEFAULT, name="shared", selection="shared"),
    )
}


def load_demo(quantize: str = "none"):
    """The demo model as the app loads it (the cache's attention, which records what eviction and recall read)."""
    config = ModelConfig(model="demo", device="cpu", dtype="float32", quantize=quantize)
    return load_model(config, text_attention=register_attention())


def clips_of(stream) -> list[tuple[np.ndarray, float, float]]:
    """Every 4-s clip of the stream: (frames [4, H, W, 3] uint8, start, end)."""
    count = int(stream.duration_s // CLIP_S)
    out = []
    for k in range(count):
        t0 = k * CLIP_S
        times = t0 + np.arange(int(CLIP_S * FPS)) / FPS
        out.append((np.stack([render(stream, float(t), *FRAME) for t in times]), t0, t0 + CLIP_S))
    return out


def session_for(loaded, setup: Setup, budget: int) -> StreamingSession:
    cache = CacheConfig(
        policy=setup.policy,
        budget=1 << 16 if setup.unbounded else budget,
        recall=setup.recall,
        pin_picture=setup.pin_picture,
        selection=setup.selection,
    )
    change = ChangeConfig(drop_unchanged=setup.drop_unchanged)
    return StreamingSession(loaded, cache, SessionConfig(max_new_tokens=ANSWER_TOKENS, change=change))


def answer(session: StreamingSession, question: str) -> str:
    return "".join(session.ask(question)).strip()


def run_setup(models, setup: Setup, seed: int, stream, probes, clips, budget: int, watches: list[str]):
    """(question rows, watch rows) of one setup on one stream."""
    loaded = models["int8" if setup.int8 else "fp32"]
    rows, watch_rows = [], []
    session = None if setup.last_frames_only else session_for(loaded, setup, budget)
    pending = list(probes)
    for frames, t0, t1 in clips:
        if session is not None:
            session.ingest_clip(frames, t0, t1)
            for question in watches:
                p_yes = session.check(question).p_yes
                truth = any(
                    matches(question.split("?")[0].removeprefix("Is there "))(x) for x in stream.visible(t1 - 1)
                )
                check = {"setup": setup.name, "seed": seed, "watch": question, "t": t1, "p_yes": round(p_yes, 4)}
                watch_rows.append({**check, "truth": truth})
        while pending and pending[0].ask_s <= t1 + 1e-9:
            probe = pending.pop(0)
            if setup.last_frames_only:
                fresh = session_for(loaded, setup, budget)
                fresh.ingest_clip(frames, t0, t1)
                said = answer(fresh, probe.question.text)
            else:
                said = answer(session, probe.question.text)
            rows.append(
                {
                    "setup": setup.name,
                    "seed": seed,
                    "ask_s": probe.ask_s,
                    "delay_s": round(probe.delay_s),
                    "kind": probe.question.kind,
                    "question": probe.question.text,
                    "truth": probe.question.answer,
                    "answer": said,
                    "correct": correct(said, probe.question),
                    "stream_tokens": session.cache.tokens_seen if session is not None else 0,
                }
            )
    return rows, watch_rows


def delay_bucket(delay_s: float) -> str:
    """now, 1 min, 3 min, 10 min (the plan's delays plus the few seconds to the next clip end)."""
    if delay_s < 30:
        return "now"
    return f"{min((60, 180, 600), key=lambda d: abs(d - delay_s)) // 60} min"


def wilson(right: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson interval of a proportion."""
    if total == 0:
        return (math.nan, math.nan)
    p = right / total
    centre = (p + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return (max(0.0, centre - half), min(1.0, centre + half))


def summarize(rows: list[dict]) -> list[dict]:
    groups: dict[tuple, list[bool]] = defaultdict(list)
    for row in rows:
        groups[(row["setup"], delay_bucket(row["delay_s"]))].append(bool(row["correct"]))
    out = []
    for (setup, bucket), marks in sorted(groups.items()):
        low, high = wilson(sum(marks), len(marks))
        out.append(
            {
                "setup": setup,
                "delay": bucket,
                "questions": len(marks),
                "accuracy": round(sum(marks) / len(marks), 3),
                "low95": round(low, 3),
                "high95": round(high, 3),
            }
        )
    return out


def score_watches(rows: list[dict]) -> list[dict]:
    """Per watch: precision and recall of its per-clip state (p_yes >= 0.5), and the clips from the truth's begin
    (end) to the first on (off) check."""
    out = []
    for setup, watch in sorted({(r["setup"], r["watch"]) for r in rows}):
        mine = [r for r in rows if r["watch"] == watch and r["setup"] == setup]
        tp = sum(r["p_yes"] >= 0.5 and r["truth"] for r in mine)
        fp = sum(r["p_yes"] >= 0.5 and not r["truth"] for r in mine)
        fn = sum(r["p_yes"] < 0.5 and r["truth"] for r in mine)
        begins, ends = [], []
        for seed in sorted({r["seed"] for r in mine}):
            series = [r for r in mine if r["seed"] == seed]
            for i, r in enumerate(series):
                if r["truth"] and (i == 0 or not series[i - 1]["truth"]):
                    begins.append(_lag(series, i, on=True))
                if not r["truth"] and i and series[i - 1]["truth"]:
                    ends.append(_lag(series, i, on=False))
        out.append(
            {
                "setup": setup,
                "watch": watch,
                "checks": len(mine),
                "precision": round(tp / (tp + fp), 3) if tp + fp else math.nan,
                "recall": round(tp / (tp + fn), 3) if tp + fn else math.nan,
                "begins": len(begins),
                "begin_late_clips": round(float(np.mean(begins)), 2) if begins else math.nan,
                "end_late_clips": round(float(np.mean(ends)), 2) if ends else math.nan,
            }
        )
    return out


def _lag(series: list[dict], start: int, on: bool) -> int:
    for j in range(start, len(series)):
        if (series[j]["p_yes"] >= 0.5) == on:
            return j - start
    return len(series) - start


def table(summary: list[dict], order: list[str]) -> str:
    buckets = ["now", "1 min", "3 min", "10 min"]
    cells = {(r["setup"], r["delay"]): r for r in summary}
    lines = ["| setup | " + " | ".join(buckets) + " |", "|---|" + "---|" * len(buckets)]
    for setup in order:
        row = []
        for bucket in buckets:
            r = cells.get((setup, bucket))
            row.append(
                "" if r is None else f"{r['accuracy']:.2f} [{r['low95']:.2f}, {r['high95']:.2f}] ({r['questions']})"
            )
        lines.append(f"| {setup} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def plot(summary: list[dict], order: list[str], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    buckets = ["now", "1 min", "3 min", "10 min"]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for k, setup in enumerate(order):
        rows = {r["delay"]: r for r in summary if r["setup"] == setup}
        xs = [i + (k - len(order) / 2) * 0.025 for i, b in enumerate(buckets) if b in rows]
        ys = [rows[b]["accuracy"] for b in buckets if b in rows]
        err = [
            [rows[b]["accuracy"] - rows[b]["low95"] for b in buckets if b in rows],
            [rows[b]["high95"] - rows[b]["accuracy"] for b in buckets if b in rows],
        ]
        style = "-" if setup in ("default", "full", "simplestream") else ":"
        ax.errorbar(xs, ys, yerr=err, marker="o", linestyle=style, capsize=2, label=setup)
    ax.set_xticks(range(len(buckets)), buckets)
    ax.set_xlabel("question asked this long after its scene")
    ax.set_ylabel("answers right (95% interval)")
    ax.set_ylim(0, 1.02)
    ax.set_title(title)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--streams", type=int, default=6, help="generated streams (seeds 0..N-1) (default %(default)s)")
    p.add_argument("--duration", type=float, default=720.0, help="seconds per stream, >= 720 (default %(default)s)")
    p.add_argument("--budget", type=int, default=256, help="cache budget, tokens (default %(default)s)")
    p.add_argument("--setups", nargs="+", default=list(SETUPS), choices=list(SETUPS), metavar="SETUP",
                   help=f"setups to run (default: all): {', '.join(SETUPS)}")  # fmt: skip
    p.add_argument("--out", type=Path, default=Path("docs/video_qa"), help="folder for CSV, table and plot")
    p.add_argument("--threads", type=int, default=2, help="torch CPU threads (default %(default)s)")
    args = p.parse_args(argv)
    if args.streams < 1 or args.budget < 128 or args.duration < 720:
        p.error("--streams must be >= 1, --budget >= 128 tokens and --duration >= 720 s (10-minute questions)")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    models = {"fp32": load_demo()}
    if any(SETUPS[s].int8 for s in args.setups):
        models["int8"] = load_demo(quantize="int8")
    rows, watch_rows = [], []
    began = time.perf_counter()
    with tqdm(total=args.streams * len(args.setups), desc="streams x setups", unit="run") as bar:
        for seed in range(args.streams):
            stream, probes = long_stream(seed, args.duration, CLIP_S, FPS)
            clips = clips_of(stream)
            kind = stream.scenes[0].things[0].kind if stream.scenes[0].things else "ball"
            watches = ["Is there a person?", f"Is there a {kind}?"]
            for name in args.setups:
                setup = SETUPS[name]
                got, watched = run_setup(
                    models, setup, seed, stream, probes, clips, args.budget, watches if name in WATCH_SETUPS else []
                )
                rows += got
                watch_rows += watched
                bar.update(1)
    summary = summarize(rows)
    write_csv(rows, args.out / "answers.csv")
    write_csv(summary, args.out / "summary.csv")
    tokens = max(r["stream_tokens"] for r in rows)
    machine = f"{platform.processor() or platform.machine()}, {torch.get_num_threads()} threads"
    title = f"demo model, {args.streams} x {args.duration / 60:.0f}-min streams, budget {args.budget}"
    text = [f"{title} ({tokens} tokens seen per stream; {machine}; {time.perf_counter() - began:.0f} s)", ""]
    text.append(table(summary, args.setups))
    if watch_rows:
        watch_summary = score_watches(watch_rows)
        write_csv(watch_rows, args.out / "watch_checks.csv")
        write_csv(watch_summary, args.out / "watches.csv")
        text += ["", "| setup | watch | checks | precision | recall | begins | begin late (clips) | end late (clips) |"]
        text.append("|---|---|---|---|---|---|---|---|")
        for w in watch_summary:
            text.append(
                f"| {w['setup']} | {w['watch']} | {w['checks']} | {w['precision']} | {w['recall']} | {w['begins']} | "
                f"{w['begin_late_clips']} | {w['end_late_clips']} |"
            )
    (args.out / "table.md").write_text("\n".join(text) + "\n")
    plot(summary, args.setups, args.out / "accuracy_by_delay.png", title)
    print("\n".join(text))
    print(f"wrote {args.out}/answers.csv, summary.csv, table.md and accuracy_by_delay.png")


if __name__ == "__main__":
    main()
