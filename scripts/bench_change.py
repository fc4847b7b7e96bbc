"""What the change detector alone costs per clip (model/change.py), on frames of the size the model sees.

    python scripts/bench_change.py                    # 448x448 (Qwen2-VL-2B shape) and 448x336, 4-frame clips
    python scripts/bench_change.py --size 640x480 --clips 50

A fixed camera (capture/synth_camera.py: a real photo, sensor noise, a slow exposure drift, no encoder) is
rendered once; a ChangeTracker with the defaults (key frames off, so every clip is compared) then selects
clip after clip. Prints the process CPU time per 4-frame clip (median and mean over --clips, after one warm-up
clip), one thread of numpy, and the largest region score seen on the static camera.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capture.synth_camera import CameraVideoConfig, load_scene, render_camera_frame  # noqa: E402
from model.change import ChangeConfig, ChangeLayout, ChangeTracker  # noqa: E402


def size(text: str) -> tuple[int, int]:
    w, h = text.lower().split("x")
    return int(w), int(h)


def measure(width: int, height: int, clips: int, frames: int) -> tuple[list[float], float]:
    """CPU seconds of each clip's select() after a warm-up key frame, and the largest score seen."""
    config = CameraVideoConfig(size=(width, height), drift_period_s=600.0)
    scene = load_scene(config.scene, config.size)
    rng = np.random.default_rng(0)
    video = np.stack([render_camera_frame(config, scene, t, rng) for t in range(frames * (clips + 1))])
    tracker = ChangeTracker(ChangeConfig(keyframe_every=10**9))
    layout = ChangeLayout(group=2, region=28)
    tracker.select(video[:frames], layout, keyframe=True)
    times, top = [], 0.0
    for c in range(1, clips + 1):
        start = time.process_time()
        got = tracker.select(video[c * frames : (c + 1) * frames], layout, keyframe=False)
        times.append(time.process_time() - start)
        top = max(top, float(got.score.max()))
    return times, top


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=size, action="append", help="WxH px (repeatable; default 448x448, 448x336)")
    parser.add_argument("--clips", type=int, default=30, help="clips measured per size")
    parser.add_argument("--frames", type=int, default=4, help="frames per clip")
    args = parser.parse_args()
    print(f"{platform.processor() or platform.machine()}, numpy {np.__version__}")
    print("| frame | ms / clip (median) | ms / clip (mean) | largest static score |")
    print("|---|---|---|---|")
    for width, height in args.size or [(448, 448), (448, 336)]:
        times, top = measure(width, height, args.clips, args.frames)
        ms = [1000 * t for t in times]
        print(f"| {width}x{height} | {statistics.median(ms):.1f} | {statistics.mean(ms):.1f} | {top:.3f} |")


if __name__ == "__main__":
    main()
