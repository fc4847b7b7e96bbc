"""What dropping unchanged visual tokens saves when a stream is ingested (issue 30), and what it keeps.

    python scripts/bench_ingest.py                       # tiny, small, qwen2-vl-2b x static, moving, demo
    python scripts/bench_ingest.py --shapes small --clips 17
    python scripts/bench_ingest.py --quick --shapes tiny # a smoke test: short videos, 3 clips

Videos (rendered once into --videos): a fixed camera (capture/synth_camera.py: a real photo, sensor noise,
exposure drift, H.264 at 1 Mbit/s) with nothing happening ("static"), the same camera while a person crosses
part of the frame for the middle half of the video ("moving", its per-frame box is the ground truth), and the
demo video (scripts/make_demo_video.py: scenes that change and move everywhere, with moving grain); on
request also "flicker": the static camera under a light flickering +-5% at 100 Hz, read by a rolling shutter
(bands that roll through the frame).

Per shape (the tiny test model, the "small" and Qwen2-VL-2B shapes of model/sized.py, random weights) and
video: two sessions on one model, dropping off and on (model/change.py defaults), fed the same clips (1
frame/s, --clip-seconds each), the two modes alternating which goes first at each clip so both see the same
load on a shared machine. Per clip: visual tokens in full and kept, the vision tower's and the prefill's ms
(bus.ClipStats), the wall time of the whole ingest (resizing and the change gate included); with the moving
object, which of its tokens were kept (its box, against the token grid of every temporal patch), and of the
tokens the object never touched, which were dropped.

Steady state per stream: a key frame every `keyframe_every` clips costs what a clip with dropping off costs;
the other clips cost the median of the non-key clips measured. From it: ms per clip (medians), how many
1-frame/s streams this device ingests in real time (clip seconds / ms per clip, ingestion only) and the
cache's horizon (seconds of stream whose tokens fit the budget: budget / tokens per clip x clip seconds).
"Cheaper" and the streams come from the process's CPU time per ingest (with --threads 1: one core's work,
which a crowded machine's preemption does not inflate as it does wall time); vision and prefill ms are wall
time (bus.ClipStats), so they carry the machine's load.

Writes --out/bench_ingest.csv (per clip), bench_ingest_summary.csv, bench_ingest.png, and prints a markdown
table with the machine it ran on.
"""

from __future__ import annotations

import argparse
import csv
import gc
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cache.attention import register_attention  # noqa: E402
from cache.config import CacheConfig  # noqa: E402
from capture import CaptureConfig, CaptureThread, Clip, EndOfStream  # noqa: E402
from capture.synth import write_video  # noqa: E402
from capture.synth_camera import CameraVideoConfig, box_at, load_boxes, write_boxes, write_camera_video  # noqa: E402
from model.change import ChangeConfig, ChangeTracker  # noqa: E402
from model.config import QUANTIZE_CHOICES, ModelConfig  # noqa: E402
from model.loading import LoadedModel, load_model  # noqa: E402
from model.quantize import quantize_model  # noqa: E402
from model.session import SessionConfig, StreamingSession  # noqa: E402
from model.sized import build_sized_qwen2_vl  # noqa: E402

SHAPES = ("tiny", "small", "qwen2-vl-2b")
VIDEOS = ("static", "moving", "demo", "flicker")
MODES = ("off", "on")
GOALS = "static >= 80% dropped, >= 3x cheaper per clip, >= 3x streams and horizon, >= 95% of the object kept"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", nargs="+", choices=SHAPES, default=list(SHAPES), help="model shapes")
    p.add_argument("--videos", nargs="+", choices=VIDEOS, default=list(VIDEOS[:3]), help="which videos")
    p.add_argument("--clips", type=int, default=9, help="clips per video (the first is always whole)")
    p.add_argument("--clip-seconds", type=float, default=4.0, help="stream seconds per clip (1 frame/s)")
    p.add_argument("--budget", type=int, default=CacheConfig().budget, help="the cache's budget, tokens")
    p.add_argument("--append", action="store_true",
                   help="keep the rows of the shapes and videos not measured now from --out's CSV (a slow shape "
                   "can run on its own with fewer --clips); the summary, plot and table cover them all")  # fmt: skip
    p.add_argument(
        "--report-only",
        action="store_true",
        help="measure nothing: the summary, plot and table of --out's CSV (e.g. after an interrupted run)",
    )
    p.add_argument(
        "--keyframe-sweep",
        type=int,
        nargs="+",
        default=[],
        metavar="N",
        help="also print each video's steady state with a key frame every N clips, from the same measured clips "
        "(e.g. 8 16 32 64 128; add --report-only to measure nothing)",
    )
    p.add_argument("--quantize", choices=QUANTIZE_CHOICES, default="none",
                   help="int8: the model's linear layers as --quantize int8 makes them (model/quantize.py); its rows "
                   "are the shape's name + ' int8' (with --append, next to the fp32 rows)")  # fmt: skip
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default, every core)")
    p.add_argument("--quick", action="store_true", help="smoke test: 3 clips of small, short videos")
    p.add_argument("--videos-dir", type=Path, default=Path("out/bench_ingest"), help="rendered videos")
    p.add_argument("--out", type=Path, default=Path("docs/change"), help="CSV, PNG")
    args = p.parse_args(argv)
    if args.quick:
        args.clips = min(args.clips, 3)
    if args.clips < 2:
        p.error("--clips must be >= 2 (the first clip is always whole)")
    if any(n < 1 for n in args.keyframe_sweep):
        p.error("--keyframe-sweep intervals must be >= 1 (clips between key frames)")
    if args.clip_seconds <= 0 or args.budget < 64 or args.threads < 0:
        p.error("--clip-seconds must be > 0, --budget >= 64 and --threads >= 0")
    return args


# -- videos ------------------------------------------------------------------------------------------------


def make_videos(args: argparse.Namespace) -> dict[str, Path]:
    """Renders (once per settings) the videos asked for; returns {name: path}."""
    duration = args.clips * args.clip_seconds
    size, fps = ((320, 240), 2.0) if args.quick else ((640, 480), 10.0)
    folder = args.videos_dir / f"{size[0]}x{size[1]}_{fps:g}fps_{duration:g}s"
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name in args.videos:
        path = folder / f"{name}.mp4"
        paths[name] = path
        if path.exists():
            continue
        part = path.with_name(f"{name}.part.mp4")
        if name == "demo":
            write_video(part, "libx264", size, fps, duration, options={"preset": "veryfast", "crf": "23"},
                        scene_seconds=10.0, marker=False, textured=True)  # fmt: skip
        else:
            extra = {
                "moving": dict(object_enter_s=0.25 * duration, object_exit_s=0.75 * duration),
                "flicker": dict(flicker_depth=0.05, rolling_shutter_s=0.02),
            }.get(name, {})
            config = CameraVideoConfig(size=size, fps=fps, duration_s=duration, **extra)
            truth = write_camera_video(part, config)
            write_boxes(path, config, truth)
        part.rename(path)
    return paths


def read_clips(path: Path, clip_seconds: float) -> list[Clip]:
    """The clips the app would ingest from `path` (1 frame/s), decoded once."""
    stop = threading.Event()
    capture = CaptureThread(CaptureConfig(str(path), fps=1.0, clip_seconds=clip_seconds, block_when_full=True), stop)
    capture.start()
    clips = []
    while True:
        item = capture.get_clip(timeout=60.0)
        if item is None:
            stop.set()
            raise RuntimeError(f"no clip from {path} within 60 s")
        if isinstance(item, EndOfStream):
            break
        clips.append(item)
    capture.join(10.0)
    return [c for c in clips if c.t_end - c.t_start >= clip_seconds - 1e-6]  # whole clips only


# -- ground truth on the token grid ----------------------------------------------------------------------------


def region_mask(boxes: list[tuple[int, int, int, int]], video_size: tuple[int, int], view_hw: tuple[int, int],
                region: int) -> np.ndarray:  # fmt: skip
    """[Rh, Rw] bool: the token regions (region x region px of the model's view, the whole frame resized)
    that any of `boxes` (pixels of the video) overlaps."""
    height, width = view_hw
    rh, rw = height // region, width // region
    mask = np.zeros((rh, rw), dtype=bool)
    sx, sy = width / video_size[0], height / video_size[1]
    for x0, y0, x1, y1 in boxes:
        c0, c1 = int(x0 * sx // region), int(np.ceil(x1 * sx / region))
        r0, r1 = int(y0 * sy // region), int(np.ceil(y1 * sy / region))
        mask[max(r0, 0) : min(r1, rh), max(c0, 0) : min(c1, rw)] = True
    return mask


def group_boxes(record: dict | None, times: list[float], group: int) -> list[list[tuple[int, int, int, int]]]:
    """Per temporal group of a clip's frames (`times`, padded to whole groups by repeating the last), the
    object's boxes in those frames."""
    if record is None:
        return []
    padded = times + [times[-1]] * (-len(times) % group)
    out = []
    for g in range(len(padded) // group):
        boxes = [box_at(record, t) for t in padded[g * group : (g + 1) * group]]
        out.append([b for b in boxes if b is not None])
    return out


@dataclass
class Truth:
    """Per clip of the "on" session: tokens of the object (kept), and tokens it never touched (dropped)."""

    object_tokens: int = 0
    object_kept: int = 0
    static_tokens: int = 0
    static_dropped: int = 0


def score_selection(keep: np.ndarray, per_group: list[list], previous: list, video_size, view_hw,
                    region: int) -> Truth:  # fmt: skip
    """keep: [G, Rh, Rw]. A token is the object's when its group's boxes overlap it; static when neither its
    group's boxes nor the previous group's (what the object uncovers changes too) do."""
    truth = Truth()
    for g in range(keep.shape[0]):
        boxes = per_group[g] if g < len(per_group) else []
        before = per_group[g - 1] if g else previous
        obj = region_mask(boxes, video_size, view_hw, region)
        static = ~(obj | region_mask(before, video_size, view_hw, region))
        truth.object_tokens += int(obj.sum())
        truth.object_kept += int((keep[g] & obj).sum())
        truth.static_tokens += int(static.sum())
        truth.static_dropped += int((~keep[g] & static).sum())
    return truth


# -- the measurement ------------------------------------------------------------------------------------------


def build(shape: str, quantize: str = "none") -> LoadedModel:
    attention = register_attention()
    if shape == "tiny":
        loaded = load_model(ModelConfig(model="tiny", device="cpu", dtype="float32"), attention)
    else:
        loaded = build_sized_qwen2_vl(shape, attention)
    if quantize == "int8":
        print(quantize_model(loaded.model).describe(), file=sys.stderr)
    return loaded


def label(shape: str, args) -> str:
    return f"{shape} int8" if args.quantize == "int8" else shape


def measure(loaded: LoadedModel, shape: str, video: str, path: Path, args, bar: tqdm) -> list[dict]:
    """Both modes on the clips of one video, interleaved; one row per clip and mode."""
    clips = read_clips(path, args.clip_seconds)[: args.clips]
    record = load_boxes(path) if video != "demo" else None
    cache = CacheConfig(budget=args.budget)
    sessions = {
        "off": StreamingSession(loaded, cache, SessionConfig(change=ChangeConfig(drop_unchanged=False))),
        "on": StreamingSession(loaded, cache, SessionConfig(change=ChangeConfig())),
    }
    mirror = ChangeTracker(ChangeConfig())  # the "on" session's decisions, token by token, for the truth
    layout = loaded.adapter.change_layout()
    rows, previous = [], []
    for i, clip in enumerate(clips):
        order = MODES if i % 2 == 0 else MODES[::-1]
        for mode in order:
            started, cpu = time.perf_counter(), time.process_time()
            m = sessions[mode].ingest_clip(clip.frames, clip.t_start, clip.t_end)
            wall_ms = (time.perf_counter() - started) * 1000
            cpu_ms = (time.process_time() - cpu) * 1000
            row = dict(shape=shape, video=video, clip=i, mode=mode, t_start=clip.t_start, t_end=clip.t_end,
                       keyframe=m.keyframe, visual_tokens=m.visual_tokens, visual_tokens_kept=m.visual_tokens_kept,
                       visual_tokens_changed=m.visual_tokens_changed, prefill_tokens=m.prefill_tokens,
                       vision_ms=round(m.vision_s * 1000, 2), prefill_ms=round((m.prefill_s - m.vision_s) * 1000, 2),
                       total_ms=round(wall_ms, 2), cpu_ms=round(cpu_ms, 2), object_tokens=None, object_kept=None,
                       static_tokens=None, static_dropped=None)  # fmt: skip
            if mode == "on":
                view = loaded.adapter.clip_segment(clip.frames, clip.t_start, clip.t_end).view
                selection = mirror.select(view, layout, keyframe=mirror.keyframe_due())
                if selection.kept != m.visual_tokens_kept:
                    raise RuntimeError(f"mirror kept {selection.kept}, the session {m.visual_tokens_kept}")
                if record is not None:
                    per_group = group_boxes(record, list(clip.timestamps), layout.group)
                    truth = score_selection(selection.keep, per_group, previous, tuple(record["size"]),
                                            view.shape[1:3], layout.region)  # fmt: skip
                    row |= vars(truth)
                    previous = per_group[-1] if per_group else []
            rows.append(row)
        bar.update(1)
    return rows


# -- summary ----------------------------------------------------------------------------------------------


def steady(key_value: float, other: list[float], keyframe_every: int) -> float:
    """Per clip in steady state: one key frame (costing `key_value`) every `keyframe_every` clips."""
    if not other:
        return key_value
    share = 1 / keyframe_every
    return share * key_value + (1 - share) * statistics.median(other)


def keyframe_sweep(rows: list[dict], intervals: list[int], clip_seconds: float) -> list[dict]:
    """Per (shape, video) and key-frame interval (clips): steady-state CPU ms per clip with dropping on (a key
    frame costs the median clip with dropping off, the other clips the median non-key clip with dropping on)
    and the 1-frame/s streams one core ingests in real time. Derived from the measured rows, not measured."""
    out = []
    for shape, video in dict.fromkeys((r["shape"], r["video"]) for r in rows):
        cell = [r for r in rows if r["shape"] == shape and r["video"] == video and r["clip"] > 0]  # after warm-up
        off = [r["cpu_ms"] for r in cell if r["mode"] == "off"]
        on = [r["cpu_ms"] for r in cell if r["mode"] == "on" and not r["keyframe"]]
        if not off:
            continue
        for every in intervals:
            ms = steady(statistics.median(off), on, every)
            out.append(dict(shape=shape, video=video, keyframe_every=every, minutes=every * clip_seconds / 60,
                            cpu_ms_on=round(ms, 2), streams_on=round(clip_seconds * 1000 / ms, 2)))  # fmt: skip
    return out


def sweep_markdown(sweep: list[dict]) -> str:
    lines = [
        "Key-frame interval (steady state with dropping on, from the same clips: a key frame costs what a clip "
        "with dropping off costs):",
        "",
        "| shape | video | key frame every | ingest CPU ms / clip | streams in real time per core |",
        "|---|---|---|---|---|",
    ]
    for s in sweep:
        lines.append(
            f"| {s['shape']} | {s['video']} | {s['keyframe_every']} clips ({s['minutes']:.1f} min) "
            f"| {s['cpu_ms_on']:.0f} | {s['streams_on']:.2f} |"
        )
    return "\n".join(lines)


def summarize(rows: list[dict], args) -> list[dict]:
    every = ChangeConfig().keyframe_every
    out = []
    for shape, video in dict.fromkeys((r["shape"], r["video"]) for r in rows):
        cell = [r for r in rows if r["shape"] == shape and r["video"] == video and r["clip"] > 0]  # after warm-up
        off = [r for r in cell if r["mode"] == "off"]
        on = [r for r in cell if r["mode"] == "on" and not r["keyframe"]]

        def med(rs, key):
            return statistics.median(r[key] for r in rs)

        s = dict(shape=shape, video=video, clips=len(off) + 1)
        for key in ("visual_tokens_kept", "prefill_tokens", "vision_ms", "prefill_ms", "total_ms", "cpu_ms"):
            s[f"{key}_off"] = round(med(off, key), 2)
            s[f"{key}_on"] = round(steady(med(off, key), [r[key] for r in on], every), 2)
        s["visual_tokens"] = med(off, "visual_tokens")
        s["dropped_share"] = round(1 - s["visual_tokens_kept_on"] / s["visual_tokens"], 4)
        s["cheaper_x"] = round(s["cpu_ms_off"] / s["cpu_ms_on"], 2)
        for mode in MODES:
            s[f"streams_{mode}"] = round(args.clip_seconds * 1000 / s[f"cpu_ms_{mode}"], 2)
            s[f"horizon_s_{mode}"] = round(args.budget / s[f"prefill_tokens_{mode}"] * args.clip_seconds, 1)
        s["horizon_x"] = round(s["horizon_s_on"] / s["horizon_s_off"], 2)
        scored = [r for r in on if r["object_tokens"] is not None]
        objects = sum(r["object_tokens"] for r in scored)
        statics = sum(r["static_tokens"] for r in scored)
        s["object_kept_share"] = round(sum(r["object_kept"] for r in scored) / objects, 4) if objects else None
        s["static_dropped_share"] = round(sum(r["static_dropped"] for r in scored) / statics, 4) if statics else None
        out.append(s)
    return out


def machine() -> str:
    """`AMD EPYC, 2 cores, torch 2.x (2 threads), load 1.2`: what the numbers were measured on."""
    model = platform.processor() or platform.machine()
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        model = next(line.split(":", 1)[1].strip() for line in lscpu.splitlines() if line.startswith("Model name"))
    except (OSError, subprocess.SubprocessError, StopIteration):
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{model}, {os.cpu_count()} cores, torch {torch.__version__} ({torch.get_num_threads()} torch threads), "
            f"float32, load average {load:.1f}")  # fmt: skip


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def markdown(summary: list[dict], machine_line: str, args) -> str:
    lines = [
        f"Machine: {machine_line}. Budget {args.budget} tokens, {args.clip_seconds:g}-second clips at 1 frame/s, "
        "off -> on (dropping unchanged tokens, model/change.py defaults); clips per video (the first, whole in "
        "both modes, is a warm-up left out of the medians).",
        "",
        "| shape | video | clips | visual tokens / clip | dropped | vision ms / clip | prefill ms / clip "
        "| ingest ms / clip | ingest CPU ms / clip | cheaper (CPU) | streams in real time per core | horizon s "
        "| object tokens kept | static tokens dropped |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in summary:
        lines.append(
            f"| {s['shape']} | {s['video']} | {s['clips']} "
            f"| {s['visual_tokens']:.0f} -> {s['visual_tokens_kept_on']:.0f} "
            f"| {_pct(s['dropped_share'])} | {s['vision_ms_off']:.0f} -> {s['vision_ms_on']:.0f} "
            f"| {s['prefill_ms_off']:.0f} -> {s['prefill_ms_on']:.0f} | {s['total_ms_off']:.0f} -> "
            f"{s['total_ms_on']:.0f} | {s['cpu_ms_off']:.0f} -> {s['cpu_ms_on']:.0f} | {s['cheaper_x']:.1f}x "
            f"| {s['streams_off']:.2f} -> {s['streams_on']:.2f} "
            f"| {s['horizon_s_off']:.0f} -> {s['horizon_s_on']:.0f} | {_pct(s['object_kept_share'])} "
            f"| {_pct(s['static_dropped_share'])} |"
        )
    lines += ["", f"Goals (issue 30): {GOALS}."]
    return "\n".join(lines)


def plot(summary: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [("visual_tokens_kept", "visual tokens entering the cache / clip"), ("cpu_ms", "ingest CPU ms / clip"),
              ("streams", "1-frame/s streams per core"), ("horizon_s", "cache horizon, s of stream")]  # fmt: skip
    short = {"qwen2-vl-2b": "2B"}
    labels = [f"{short.get(s['shape'], s['shape'])}\n{s['video']}" for s in summary]
    x = np.arange(len(summary))
    fig, axes = plt.subplots(2, 2, figsize=(14, 9))
    axes = axes.reshape(-1)
    for ax, (key, name) in zip(axes, panels, strict=True):
        for k, (mode, color) in enumerate((("off", "#9ca3af"), ("on", "#7c3aed"))):
            ax.bar(x + (k - 0.5) * 0.4, [s[f"{key}_{mode}"] for s in summary], 0.4, label=f"dropping {mode}",
                   color=color)  # fmt: skip
        ax.set_yscale("log")
        ax.set_title(name, fontsize=10)
        ax.set_xticks(x, labels, fontsize=8)
        ax.grid(alpha=0.3, axis="y")
    axes[0].legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def read_rows(path: Path, skip: list[tuple[str, str]]) -> list[dict]:
    """The per-clip rows of an earlier run (numbers and flags parsed back), but those of the (shape, video)
    pairs `skip`."""
    if not path.exists():
        return []

    def value(text: str):
        if text in ("", "True", "False"):
            return None if text == "" else text == "True"
        try:
            return int(text)
        except ValueError:
            try:
                return float(text)
            except ValueError:
                return text

    with path.open(newline="") as f:
        rows = [{k: value(v) for k, v in row.items()} for row in csv.DictReader(f)]
    return [r for r in rows if (r["shape"], r["video"]) not in skip]


def write_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def main(argv: list[str] | None = None) -> str:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    machine_before = machine()
    if args.report_only:
        return report(read_rows(args.out / "bench_ingest.csv", []), args, f"{machine_before} (when reported)")
    paths = make_videos(args)
    measured = [(label(shape, args), video) for shape in args.shapes for video in args.videos]
    rows: list[dict] = read_rows(args.out / "bench_ingest.csv", measured) if args.append else []
    with tqdm(total=len(args.shapes) * len(paths) * args.clips, desc="bench_ingest", unit="clip") as bar:
        for shape in args.shapes:
            bar.set_postfix(shape=shape, stage="building")
            loaded = build(shape, args.quantize)
            for video, path in paths.items():
                bar.set_postfix(shape=shape, video=video)
                rows += measure(loaded, label(shape, args), video, path, args, bar)
                write_csv(args.out / "bench_ingest.csv", rows)  # what is done survives an interrupted run
            del loaded
            gc.collect()
    return report(rows, args, f"{machine_before} (at the end: load average {os.getloadavg()[0]:.1f})")


def report(rows: list[dict], args, machine_line: str) -> str:
    """Writes the summary CSV and the plot of `rows`; prints and returns the markdown table."""
    summary = summarize(rows, args)
    write_csv(args.out / "bench_ingest_summary.csv", summary)
    machine_short = machine_line.split(", load average")[0]
    plot(summary, args.out / "bench_ingest.png", f"dropping unchanged visual tokens, off vs on. {machine_short}")
    table = markdown(summary, machine_line, args)
    if args.keyframe_sweep:
        table += "\n\n" + sweep_markdown(keyframe_sweep(rows, args.keyframe_sweep, args.clip_seconds))
    print(table)
    print(f"wrote {args.out}/bench_ingest.csv, bench_ingest_summary.csv, bench_ingest.png")
    return table


if __name__ == "__main__":
    main()
