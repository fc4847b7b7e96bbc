"""A day of stream time through `python -m app`, then the slope of every resource after warm-up.

    python scripts/soak.py --hours 24 --out-dir out/soak --plot docs/soak.png --csv docs/soak_slopes.csv

Runs the assistant on a video file looped with `--loop` (default: a generated 10-minute 160x120 clip, so
the file is reopened 144 times a day) with the tiny model, `--no-realtime`, the host store and recall on,
and the JSON-lines event log. By default frames are sampled at a quarter of the app's rate (0.25 fps,
clips of 16 s: the same 4 frames per clip, a quarter as many clips), so that a day takes about 45 minutes
on a loaded 2-core CPU; `--fps 1 --clip-seconds 4` soaks the defaults (about 4x longer).
Every answer event carries process RSS, KV bytes, host-store tokens and bytes, OS threads and open file
descriptors; after the run each of them is fitted by least squares over
the stream time after warm-up (default: the second half) and the slopes, per hour of stream, are written
as CSV and printed as a Markdown table, with a PNG of every quantity over the day.
`--analyze LOG` redoes the analysis of an existing log without running anything.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a file from anywhere
from capture.synth import write_video  # noqa: E402

MIB = 2**20


@dataclass(frozen=True)
class Quantity:
    key: str  # answer-event field
    name: str
    unit: str
    scale: float = 1.0  # event value / scale = value in `unit`


QUANTITIES = (
    Quantity("process_rss_bytes", "process RSS", "MiB", MIB),
    Quantity("kv_bytes", "KV cache", "MiB", MIB),
    Quantity("store_tokens", "host store", "tokens"),
    Quantity("store_bytes", "host store", "MiB", MIB),
    Quantity("process_threads", "OS threads", "threads"),
    Quantity("process_open_fds", "open file descriptors", "fds"),
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--hours", type=float, default=24.0, help="hours of stream time")
    p.add_argument("--video", type=Path, default=None, help="video to loop (default: generate one in --out-dir)")
    p.add_argument("--video-minutes", type=float, default=10.0, help="length of the generated video")
    p.add_argument("--out-dir", type=Path, default=Path("out/soak"), help="log, app output, generated video")
    p.add_argument("--plot", type=Path, default=None, help="PNG (default: OUT_DIR/soak.png)")
    p.add_argument("--csv", type=Path, default=None, help="slopes CSV (default: OUT_DIR/slopes.csv)")
    p.add_argument("--warmup", type=float, default=0.5, help="fraction of the run left out of the fit")
    p.add_argument("--analyze", type=Path, default=None, help="only analyse this existing event log")
    p.add_argument("--policy", default="inf-mllm")
    p.add_argument("--every", type=float, default=120.0, help="standing question every N stream seconds")
    p.add_argument("--fps", type=float, default=0.25, help="frames sampled per stream second (app default: 1)")
    p.add_argument("--clip-seconds", type=float, default=16.0, help="stream seconds per clip (app default: 4)")
    p.add_argument("--recall", type=int, default=256, help="tokens recalled per question (0 = store off)")
    p.add_argument("--store-mb", type=float, default=16.0, help="host store bound, MiB (fills in the first hour)")
    p.add_argument("--max-new-tokens", type=int, default=16, help="answer length cap")
    p.add_argument("app_args", nargs="*", help="more `python -m app` flags, after `--`")
    args = p.parse_args(argv)
    if args.hours <= 0 or not 0 <= args.warmup < 1:
        p.error("--hours must be > 0 and --warmup in [0, 1)")
    args.plot = args.plot or args.out_dir / "soak.png"
    args.csv = args.csv or args.out_dir / "slopes.csv"
    return args


def make_video(path: Path, minutes: float) -> Path:
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    fps, tmp = 5.0, path.with_suffix(".part.mp4")
    with tqdm(total=round(minutes * 60 * fps), desc="rendering the source video", unit="frame") as bar:
        write_video(tmp, size=(160, 120), fps=fps, duration_s=minutes * 60, scene_seconds=10.0,
                    options={"preset": "ultrafast"}, progress=bar.update)  # fmt: skip
    tmp.rename(path)
    return path


def app_command(args: argparse.Namespace, video: Path, log: Path) -> list[str]:
    return [
        sys.executable, "-m", "app", "--video", str(video), "--loop", "--model", "tiny", "--no-realtime",
        "--duration", f"{args.hours * 3600:g}", "--every", f"{args.every:g}", "--policy", args.policy,
        "--fps", f"{args.fps:g}", "--clip-seconds", f"{args.clip_seconds:g}",
        "--recall", str(args.recall), "--store-mb", f"{args.store_mb:g}", "--max-new-tokens",
        str(args.max_new_tokens), "--quiet", "--log-jsonl", str(log), *args.app_args,
    ]  # fmt: skip


def run_app(args: argparse.Namespace, video: Path, log: Path) -> int:
    """Runs the app, following its log for a progress bar in stream hours; returns its exit code."""
    log.unlink(missing_ok=True)
    command = app_command(args, video, log)
    print("$ " + " ".join(command), flush=True)
    out = (args.out_dir / "app.stdout").open("w")
    err = (args.out_dir / "app.stderr").open("w")
    started = time.monotonic()
    with out, err, tqdm(total=round(args.hours, 2), desc="stream hours", unit="h", bar_format=_BAR) as bar:
        proc = subprocess.Popen(command, cwd=REPO, stdout=out, stderr=err, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        position, last = 0, None
        while proc.poll() is None:
            time.sleep(2.0)
            position, events = read_new(log, position)
            for event in events:
                if event["type"] == "answer":
                    last = event
            if last is not None:
                bar.n = round(last["stream_time"] / 3600, 2)
                bar.set_postfix_str(
                    f"RSS {last['process_rss_bytes'] / MIB:.0f} MiB, store {last['store_tokens']} tok, "
                    f"threads {last.get('process_threads')}, fds {last.get('process_open_fds')}"
                )
    print(f"app exited with {proc.returncode} after {time.monotonic() - started:.0f} s wall", flush=True)
    return proc.returncode


_BAR = "{desc}: {n:.2f}/{total:.2f} h |{bar}| {elapsed}<{remaining} {postfix}"


def read_new(log: Path, position: int) -> tuple[int, list[dict]]:
    """Complete lines appended to `log` since byte `position`: (new position, their events)."""
    if not log.exists():
        return position, []
    with log.open("rb") as f:
        f.seek(position)
        data = f.read()
    end = data.rfind(b"\n") + 1
    return position + end, [json.loads(line) for line in data[:end].splitlines() if line.strip()]


def answers_of(log: Path) -> list[dict]:
    return [e for e in read_new(log, 0)[1] if e["type"] == "answer"]


@dataclass
class Slope:
    quantity: Quantity
    samples: int
    at_warmup: float  # fitted value where the fit starts, in the quantity's unit
    last: float
    low: float  # min and max over the fitted stretch
    high: float
    per_hour: float  # least-squares slope, unit per hour of stream

    @property
    def label(self) -> str:
        return f"{self.quantity.name} ({self.quantity.unit})"


def slopes(answers: list[dict], warmup: float) -> tuple[float, list[Slope]]:
    """Least-squares slope of every quantity over the answers after `warmup` (a fraction of the run)."""
    hours = np.array([a["stream_time"] / 3600 for a in answers])
    start = hours[-1] * warmup
    keep = hours >= start
    out = []
    for q in QUANTITIES:
        if any(a.get(q.key) is None for a in answers):
            continue
        values = np.array([a[q.key] / q.scale for a in answers])
        x, y = hours[keep], values[keep]
        slope, intercept = np.polyfit(x, y, 1) if len(x) > 1 else (0.0, float(y[0]))
        out.append(Slope(q, len(x), slope * start + intercept, y[-1], y.min(), y.max(), slope))
    return start, out


def signed(x: float) -> str:
    """A slope for people: 3 significant digits, and 0 for float noise (a flat line fits at ~1e-16)."""
    return "0" if abs(x) < 1e-9 else f"{x:+.3g}"


def markdown(rows: list[Slope], start_h: float, end_h: float) -> str:
    lines = [
        f"| quantity | after warm-up ({start_h:.0f} h) | end ({end_h:.0f} h) | min - max after warm-up | "
        "slope per hour | change over the fitted stretch |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        change = r.per_hour * (end_h - start_h)
        lines.append(
            f"| {r.label} | {r.at_warmup:,.2f} | {r.last:,.2f} | {r.low:,.2f} - {r.high:,.2f} | "
            f"{signed(r.per_hour)} | {signed(change)} |"
        )
    return "\n".join(lines)


def write_csv(path: Path, rows: list[Slope], start_h: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            ["quantity", "unit", "fit_from_h", "samples", "fitted_at_start", "last", "min", "max", "slope_per_h"]
        )
        for r in rows:
            w.writerow([r.quantity.key, r.quantity.unit, f"{start_h:.3f}", r.samples, f"{r.at_warmup:.6g}",
                        f"{r.last:.6g}", f"{r.low:.6g}", f"{r.high:.6g}", f"{r.per_hour:.6g}"])  # fmt: skip


def plot(path: Path, answers: list[dict], rows: list[Slope], start_h: float, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hours = np.array([a["stream_time"] / 3600 for a in answers])
    fig, axes = plt.subplots(2, 3, figsize=(16, 7), sharex=True)
    for ax, r in zip(axes.flat, rows, strict=False):
        values = [a[r.quantity.key] / r.quantity.scale for a in answers]
        ax.plot(hours, values, lw=0.8)
        fit = hours >= start_h
        ax.plot(hours[fit], r.at_warmup + r.per_hour * (hours[fit] - start_h), "r--", lw=1,
                label=f"fit: {signed(r.per_hour)} {r.quantity.unit}/h")  # fmt: skip
        ax.axvspan(0, start_h, color="grey", alpha=0.12, lw=0)
        ax.set_title(r.label)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
    for ax in axes[-1]:
        ax.set_xlabel("stream time (h)")
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def analyze(log: Path, args: argparse.Namespace) -> int:
    answers = answers_of(log)
    if len(answers) < 2:
        print(f"error: {log} has {len(answers)} answer events; nothing to fit", file=sys.stderr)
        return 2
    start_h, rows = slopes(answers, args.warmup)
    end_h = answers[-1]["stream_time"] / 3600
    write_csv(args.csv, rows, start_h)
    title = f"{end_h:.1f} h of stream ({len(answers)} answers); fits over {start_h:.1f}-{end_h:.1f} h (shaded: warm-up)"
    plot(args.plot, answers, rows, start_h, title)
    print(markdown(rows, start_h, end_h))
    print(f"wrote {args.csv} and {args.plot}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.analyze is not None:
        return analyze(args.analyze, args)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    video = args.video or make_video(args.out_dir / f"loop-{args.video_minutes:g}min-160x120.mp4", args.video_minutes)
    log = args.out_dir / "events.jsonl"
    code = run_app(args, video, log)
    if code != 0:
        print(f"error: the app exited with {code}; see {args.out_dir / 'app.stderr'}", file=sys.stderr)
        return code
    errors = [e for e in read_new(log, 0)[1] if e["type"] == "error"]
    print(f"{len(errors)} error events in the log" + (f"; first: {errors[0]['message']}" if errors else ""))
    return analyze(log, args)


if __name__ == "__main__":
    sys.exit(main())
