"""Render a fixed-camera test video: a real photo, sensor noise, exposure drift, H.264 at a camera's bitrate.

    python scripts/make_camera_video.py --variant static --out out/camera_static.mp4
    python scripts/make_camera_video.py --variant moving --out out/camera_moving.mp4   # + .boxes.json
    python scripts/make_camera_video.py --variant static --flicker 0.05 --rolling-shutter 0.02

`moving`: an object crosses the frame from left to right between --enter and --exit seconds; its box in
every frame is written to ``<out>.boxes.json`` (the ground truth of what changed). `static` writes the
same record with every box null.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a file from anywhere
from capture.synth_camera import CameraVideoConfig, write_boxes, write_camera_video  # noqa: E402

VARIANTS = ("static", "moving")


def parse_size(text: str) -> tuple[int, int]:
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size must look like 640x480, got {text!r}") from None
    return width, height


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, CameraVideoConfig]:
    d = CameraVideoConfig()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--variant", choices=VARIANTS, default="static", help="what happens in front of the camera")
    p.add_argument("--out", type=Path, default=Path("out/camera.mp4"), help="output file (.mp4, .mkv, .ts)")
    p.add_argument("--duration", type=float, default=d.duration_s, help="seconds of video")
    p.add_argument("--size", type=parse_size, default=d.size, help="WIDTHxHEIGHT in pixels (even)")
    p.add_argument("--fps", type=float, default=d.fps, help="frames per second")
    p.add_argument("--noise", type=float, default=d.noise_sigma, help="sensor noise sigma, 8-bit levels")
    p.add_argument("--drift", type=float, default=d.drift, help="exposure swing, relative (0.04 = +-4%%)")
    p.add_argument("--drift-period", type=float, default=d.drift_period_s, help="seconds per exposure swing")
    p.add_argument("--flicker", type=float, default=d.flicker_depth, help="flickering light depth (0 = none)")
    p.add_argument("--flicker-hz", type=float, default=d.flicker_hz, help="the light's flicker frequency, Hz")
    p.add_argument("--rolling-shutter", type=float, default=d.rolling_shutter_s, help="row readout time, s")
    p.add_argument("--enter", type=float, default=None, help="moving: second the object enters (default 30%%)")
    p.add_argument("--exit", type=float, default=None, help="moving: second it has left (default 70%%)")
    p.add_argument("--object-size", type=float, default=d.object_size, help="object height / frame height")
    p.add_argument("--bitrate", type=int, default=d.bitrate, help="H.264 bits per second")
    p.add_argument("--gop", type=float, default=d.gop_s, help="seconds between the encoder's key frames")
    p.add_argument("--seed", type=int, default=d.seed, help="noise seed")
    args = p.parse_args(argv)
    enter = exit_ = None
    if args.variant == "moving":
        enter = 0.3 * args.duration if args.enter is None else args.enter
        exit_ = 0.7 * args.duration if args.exit is None else args.exit
    elif args.enter is not None or args.exit is not None:
        p.error("--enter and --exit are for --variant moving")
    try:
        config = CameraVideoConfig(
            size=args.size,
            fps=args.fps,
            duration_s=args.duration,
            noise_sigma=args.noise,
            drift=args.drift,
            drift_period_s=args.drift_period,
            flicker_depth=args.flicker,
            flicker_hz=args.flicker_hz,
            rolling_shutter_s=args.rolling_shutter,
            object_enter_s=enter,
            object_exit_s=exit_,
            object_size=args.object_size,
            bitrate=args.bitrate,
            gop_s=args.gop,
            seed=args.seed,
        )
    except ValueError as err:
        p.error(str(err))
    return args, config


def main(argv: list[str] | None = None) -> None:
    args, config = parse_args(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    total = max(1, round(config.duration_s * config.fps))
    with tqdm(total=total, desc=f"rendering {args.out.name}", unit="frame") as bar:
        truth = write_camera_video(args.out, config, progress=bar.update)
    sidecar = write_boxes(args.out, config, truth)
    shown = sum(box is not None for _, box in truth)
    print(f"wrote {args.out} ({total} frames, object in view in {shown}) and {sidecar}")


if __name__ == "__main__":
    main()
