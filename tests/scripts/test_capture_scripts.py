"""The capture scripts run end to end on tiny inputs: the demo-video generator and the benchmark."""

from __future__ import annotations

import csv
import importlib.util
import json
import threading
from pathlib import Path

import pytest

from capture import CaptureConfig, CaptureThread
from capture.synth import write_video
from tests.support.capture_helpers import drain

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_make_demo_video_writes_video_and_ground_truth(tmp_path):
    out = tmp_path / "demo.mkv"
    load("make_demo_video").main(
        ["--duration", "5", "--out", str(out), "--size", "161x91", "--fps", "10", "--scene-seconds", "2"]
    )
    truth = json.loads((tmp_path / "demo.mkv.scenes.json").read_text())
    assert [(s["start_s"], s["end_s"]) for s in truth] == [(0, 2), (2, 4), (4, 5)]
    assert truth[0]["caption"] != truth[1]["caption"]
    clips = drain(CaptureThread(CaptureConfig(str(out), fps=1.0, clip_seconds=5.0), threading.Event())).clips
    assert clips[0].frames.shape == (5, 91, 161, 3)


def test_the_default_demo_video_holds_everything_the_default_assistant_reads():
    """Rendered small for a quick first run, but never below what the app samples (frames per second) and what
    the default model reads of a frame (pixels): a smaller demo would show the model less than a real video."""
    from app.cli import build_parser
    from model.adapters.qwen2_vl import STREAM_MAX_FRAME_PIXELS

    demo = load("make_demo_video").parse_args([])
    width, height = demo.size
    assert width * height >= STREAM_MAX_FRAME_PIXELS
    assert demo.fps >= build_parser().get_default("fps")
    assert demo.duration >= 300 and demo.scene_seconds < demo.duration  # minutes of changing scenes


def test_make_demo_video_rejects_bad_size():
    with pytest.raises(SystemExit):
        load("make_demo_video").parse_args(["--size", "big"])


def test_bench_capture_writes_csv_and_plot(tmp_path):
    video = tmp_path / "small.mp4"
    write_video(video, "libx264", (320, 180), 30, 2.0, options={"preset": "ultrafast"})
    out = tmp_path / "bench"
    bench = load("bench_capture")
    bench.main(
        [
            "--video",
            str(video),
            "--out",
            str(out),
            "--fps-list",
            "1",
            "30",
            "--threads",
            "1",
            "--repeats",
            "1",
        ]
    )
    rows = list(csv.DictReader((out / "bench_capture.csv").open()))
    assert [int(r["sampled_frames"]) for r in rows] == [2, 60]
    assert all(int(r["decoded_frames"]) == 60 and float(r["cpu_s_per_stream_s"]) > 0 for r in rows)
    assert (out / "bench_capture.png").stat().st_size > 0
