"""Render a demo video: moving shapes in scenes that change every few seconds (no text on them unless --caption).

    python scripts/make_demo_video.py --duration 300 --out out/demo.mp4     # 640x360, 10 fps: ~25 s on 2 cores
    python scripts/make_demo_video.py --size 1280x720 --fps 30              # full size: ~10x slower to render

The defaults are what the assistant uses of a video: it samples 1 frame/s (`--fps` of the app) and the
default model reads frames of at most 448x448 pixels (16:9: 588x336), so a larger or faster video only costs
rendering time.

Also writes ``<out>.scenes.json``: the ground truth (start, end, caption) of every scene, so answers
about the stream can be checked ("what was on screen at 0:42?").
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a file from anywhere
from capture.synth import scene_caption, write_video  # noqa: E402


def parse_size(text: str) -> tuple[int, int]:
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size must look like 1280x720, got {text!r}") from None
    if width < 16 or height < 16:
        raise argparse.ArgumentTypeError(f"size must be at least 16x16, got {text!r}")
    return width, height


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--duration", type=float, default=300.0, help="seconds of video")
    p.add_argument("--out", type=Path, default=Path("out/demo.mp4"), help="output file (.mp4, .mkv, .webm, .ts)")
    p.add_argument("--size", type=parse_size, default=(640, 360), help="WIDTHxHEIGHT in pixels")
    p.add_argument("--fps", type=float, default=10.0, help="frames per second")
    p.add_argument("--scene-seconds", type=float, default=10.0, help="seconds per scene")
    p.add_argument("--codec", default="libx264", help="PyAV encoder (libx264, libx265, libvpx-vp9, mjpeg)")
    p.add_argument("--plain", action="store_true", help="flat backgrounds (smaller, faster to encode)")
    p.add_argument("--marker", action="store_true", help="draw the frame-index strip used by the tests")
    p.add_argument(
        "--caption",
        action="store_true",
        help="write each scene's words and the time along the bottom, for a person watching (the demo model then "
        "reads them: its car watch comes on in the triangle scene, docs/demo-model.md)",
    )
    args = p.parse_args(argv)
    if args.duration <= 0 or args.fps <= 0 or args.scene_seconds <= 0:
        p.error("--duration, --fps and --scene-seconds must be > 0")
    return args


def scenes(duration: float, scene_seconds: float) -> list[dict[str, object]]:
    out, start = [], 0.0
    while start < duration:
        end = min(duration, start + scene_seconds)
        out.append({"start_s": start, "end_s": end, "caption": scene_caption(start, scene_seconds)})
        start = end
    return out


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    total = round(args.duration * args.fps)
    options = {"preset": "veryfast", "crf": "23"} if args.codec in ("libx264", "libx265") else None
    with tqdm(total=total, desc=f"rendering {args.out.name}", unit="frame") as bar:
        write_video(
            args.out,
            args.codec,
            args.size,
            args.fps,
            args.duration,
            options=options,
            scene_seconds=args.scene_seconds,
            marker=args.marker,
            textured=not args.plain,
            caption=args.caption,
            progress=bar.update,
        )
    truth = scenes(args.duration, args.scene_seconds)
    sidecar = args.out.with_name(args.out.name + ".scenes.json")
    sidecar.write_text(json.dumps(truth, indent=1))
    for scene in truth:
        print(f"{scene['start_s']:7.1f}-{scene['end_s']:7.1f} s  {scene['caption']}")
    print(f"wrote {args.out} and {sidecar}")


if __name__ == "__main__":
    main()
