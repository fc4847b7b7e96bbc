"""Benchmark capture: decode + sample + resize throughput of a 1080p H.264 file on this CPU.

For each sampling rate it runs a CaptureThread over the whole file as fast as possible (no pacing)
and reports decoded frames per second, wall and CPU seconds per second of stream (CPU time counts
every thread of the process: FFmpeg's decoder threads too), and whether it keeps up with real time.

    python scripts/bench_capture.py --out out/            # makes out/bench_1080p_h264.mp4 once
    python scripts/bench_capture.py --video my.mp4 --fps-list 1 2 30

Writes ``bench_capture.csv`` and ``bench_capture.png`` into ``--out``.
"""

from __future__ import annotations

import argparse
import csv
import os
import platform
import statistics
import sys
import threading
import time
from pathlib import Path

import av
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a file from anywhere
from capture import CaptureConfig, CaptureThread, EndOfStream  # noqa: E402
from capture.synth import write_video  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--video", type=Path, help="file to decode (default: generate a 1080p30 H.264 file)")
    p.add_argument("--out", type=Path, default=Path("out"), help="folder for the CSV, PNG and generated video")
    p.add_argument("--duration", type=float, default=20.0, help="seconds of generated video")
    p.add_argument("--crf", type=int, default=18, help="x264 quality of the generated video (18: ~4 Mbit/s)")
    p.add_argument("--fps-list", type=float, nargs="+", default=[0.5, 1, 2, 4, 30], help="sampling rates")
    p.add_argument("--max-size", type=int, nargs=2, default=[448, 448], metavar=("W", "H"), help="resize box")
    p.add_argument("--threads", type=int, nargs="+", default=[0, 1], help="decoder threads (0 = auto)")
    p.add_argument("--repeats", type=int, default=2, help="runs per setting (the median is reported)")
    return p.parse_args(argv)


def ensure_video(args: argparse.Namespace) -> Path:
    if args.video is not None:
        return args.video
    path = args.out / f"bench_1080p_h264_crf{args.crf}_{args.duration:g}s.mp4"
    if not path.exists():
        frames = round(args.duration * 30)
        with tqdm(total=frames, desc="encoding 1080p test video", unit="frame") as bar:
            write_video(
                path,
                "libx264",
                (1920, 1080),
                30,
                args.duration,
                textured=True,
                options={"preset": "veryfast", "crf": str(args.crf)},
                progress=bar.update,
            )
    return path


def probe(path: Path) -> dict[str, object]:
    with av.open(str(path)) as c:
        s = c.streams.video[0]
        duration = float(c.duration / av.time_base) if c.duration else float(s.duration * s.time_base)
        return {
            "codec": s.codec_context.name,
            "size": f"{s.width}x{s.height}",
            "source_fps": float(s.average_rate),
            "duration_s": duration,
            "bitrate_mbps": os.path.getsize(path) * 8 / duration / 1e6,
        }


def run_once(path: Path, fps: float, threads: int, max_size: tuple[int, int]) -> dict[str, float]:
    clip_s = max(4.0, 1.0 / fps)
    cfg = CaptureConfig(str(path), fps=fps, clip_seconds=clip_s, max_size=max_size, decoder_threads=threads)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    cap = CaptureThread(cfg, threading.Event())
    cap.start()
    while not isinstance(cap.get_clip(timeout=30), EndOfStream):
        pass
    cap.join(5)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    stats = cap.stats()
    return {"wall_s": wall, "cpu_s": cpu, "decoded": stats.decoded_frames, "sampled": stats.sampled_frames}


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    video = ensure_video(args)
    info = probe(video)
    stream_s = float(info["duration_s"])
    rows = []
    settings = [(t, f) for t in args.threads for f in args.fps_list]
    bar = tqdm(total=len(settings) * args.repeats, desc="benchmark", unit="run")
    for threads, fps in settings:
        runs = []
        for _ in range(args.repeats):
            runs.append(run_once(video, fps, threads, tuple(args.max_size)))
            bar.update(1)
        wall = statistics.median(r["wall_s"] for r in runs)
        cpu = statistics.median(r["cpu_s"] for r in runs)
        row = {
            "video": video.name,
            **info,
            "decoder_threads": threads or "auto",
            "sample_fps": fps,
            "max_size": f"{args.max_size[0]}x{args.max_size[1]}",
            "decoded_frames": runs[0]["decoded"],
            "sampled_frames": runs[0]["sampled"],
            "wall_s": round(wall, 3),
            "cpu_s": round(cpu, 3),
            "decode_fps": round(runs[0]["decoded"] / wall, 1),
            "cpu_s_per_stream_s": round(cpu / stream_s, 3),
            "realtime_factor": round(stream_s / wall, 2),
        }
        rows.append(row)
        bar.set_postfix(threads=row["decoder_threads"], fps=fps, cpu_per_s=row["cpu_s_per_stream_s"])
    bar.close()
    write_csv(args.out / "bench_capture.csv", rows)
    plot(args.out / "bench_capture.png", rows, info)
    print(f"CPU: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; video: {info}")
    print(markdown_table(rows))
    print(f"wrote {args.out / 'bench_capture.csv'} and {args.out / 'bench_capture.png'}")


def write_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def markdown_table(rows: list[dict]) -> str:
    cols = [
        "decoder_threads",
        "sample_fps",
        "decode_fps",
        "cpu_s_per_stream_s",
        "realtime_factor",
        "sampled_frames",
    ]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def plot(path: Path, rows: list[dict], info: dict) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for threads in dict.fromkeys(r["decoder_threads"] for r in rows):
        sel = [r for r in rows if r["decoder_threads"] == threads]
        xs = [r["sample_fps"] for r in sel]
        ax1.plot(xs, [r["cpu_s_per_stream_s"] for r in sel], "o-", label=f"decoder threads: {threads}")
        ax2.plot(xs, [r["decode_fps"] for r in sel], "o-", label=f"decoder threads: {threads}")
    ax1.axhline(1.0, color="grey", linestyle="--", linewidth=1, label="one core")
    ax1.set(xscale="log", xlabel="sampling rate (fps)", ylabel="CPU s per stream s", title="cost")
    ax2.set(xscale="log", xlabel="sampling rate (fps)", ylabel="decoded frames / s", title="throughput")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(f"capture: {info['size']} {info['codec']} {info['source_fps']:.0f} fps, {os.cpu_count()} cores")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    main()
