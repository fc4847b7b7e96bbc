"""`python -m app --model demo --video demo.mp4` answers about what is on screen, checked against the video's
scenes.json. A whole program (in-process) because the command itself is the claim: capture, sampling, change-only
ingest and the standing question all stand between the model and the answer. The shipped weights name each scene's
background, not yet the thing on it (docs/demo-model.md): the background is what is checked. (A watch on the demo
video that turns on and off with its scene waits for weights that see shapes.)"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.support.in_process_main import run_main

REPO = Path(__file__).resolve().parents[2]
DURATION_S = 40.0  # four of the demo's 10-s scenes: red ball, green square, yellow triangle, white car


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo")
    spec = importlib.util.spec_from_file_location("make_demo_video", REPO / "scripts/make_demo_video.py")
    maker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(maker)
    video = folder / "demo.mp4"
    maker.main(["--duration", str(DURATION_S), "--out", str(video)])
    return video, json.loads((folder / "demo.mp4.scenes.json").read_text())


def events(log: Path, kind: str) -> list[dict]:
    return [e for e in map(json.loads, log.read_text().splitlines()) if e["type"] == kind]


def caption_at(scenes: list[dict], t: float) -> str:
    return next(s["caption"] for s in scenes if s["start_s"] <= t < s["end_s"])


def test_the_demo_model_names_the_background_on_screen(capsys, tmp_path, demo_run):
    video, scenes = demo_run
    log = tmp_path / "events.jsonl"
    code, err = run_main(
        capsys, "--model", "demo", "--video", str(video), "--no-realtime", "--every", "4", "--quiet",
        "--log-jsonl", str(log),
    )  # fmt: skip
    assert code == 0, err
    answers = events(log, "answer")
    assert len(answers) >= 8
    # each answer is about the newest frame the model saw: the last second of its 4-s clip
    wrong = [
        (a["stream_time"], a["answer"], caption_at(scenes, a["stream_time"] - 1.0))
        for a in answers
        if not a["answer"].strip().endswith(background(caption_at(scenes, a["stream_time"] - 1.0)))
    ]
    assert not wrong, f"{len(wrong)} of {len(answers)} answers do not name the background on screen: {wrong}"


def background(caption: str) -> str:
    return " on " + caption.split(" on ", 1)[1]
