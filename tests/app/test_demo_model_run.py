"""The README's first offline command means something: `python -m app --model demo --video demo.mp4` names what is
on screen, and a watch on the demo video turns on and off with its scene, both checked against the video's
scenes.json. A whole program (in-process) because the command itself is the claim: capture, sampling, change-only
ingest, the standing question and the watch's state machine all stand between the model and the answer."""

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
    config = folder / "watch.toml"
    config.write_text(
        '[alerts.triangle]\nquestion = "Is there a yellow triangle?"\nevery = 4\non_after = 1\noff_after = 1\n'
        "cooldown = 0\n"
    )
    return video, config, json.loads((folder / "demo.mp4.scenes.json").read_text())


def events(log: Path, kind: str) -> list[dict]:
    return [e for e in map(json.loads, log.read_text().splitlines()) if e["type"] == kind]


def caption_at(scenes: list[dict], t: float) -> str:
    return next(s["caption"] for s in scenes if s["start_s"] <= t < s["end_s"])


def test_the_demo_model_names_what_is_on_screen_and_its_watch_follows_the_scene(capsys, tmp_path, demo_run):
    video, config, scenes = demo_run
    log = tmp_path / "events.jsonl"
    code, err = run_main(
        capsys, "--model", "demo", "--video", str(video), "--no-realtime", "--every", "4", "--quiet",
        "--config", str(config), "--log-jsonl", str(log),
    )  # fmt: skip
    assert code == 0, err
    answers = events(log, "answer")
    assert len(answers) >= 8
    # each answer is about the newest frame the model saw: the last second of its 4-s clip
    wrong = [
        (a["stream_time"], a["answer"], caption_at(scenes, a["stream_time"] - 1.0))
        for a in answers
        if a["answer"].strip() != caption_at(scenes, a["stream_time"] - 1.0)
    ]
    assert not wrong, f"{len(wrong)} of {len(answers)} answers do not name what is on screen: {wrong}"
    alerts = events(log, "alert")
    begins = [a["stream_time"] for a in alerts if a["state"] == "begin"]
    ends = [a["stream_time"] for a in alerts if a["state"] == "end"]
    triangle = next(s for s in scenes if "triangle" in s["caption"])
    assert len(begins) == 1 and len(ends) == 1, alerts
    # on at the first check that sees the triangle, off at the first that does not: within one 4-s clip of the scene
    assert triangle["start_s"] <= begins[0] <= triangle["start_s"] + 4.0 + 1e-6
    assert triangle["end_s"] <= ends[0] <= triangle["end_s"] + 4.0 + 1e-6
