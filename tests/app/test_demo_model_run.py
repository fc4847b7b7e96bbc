"""`python -m app --model demo --video demo.mp4` answers what is on screen, checked against the video's scenes.json,
and the recap and summary of its timeline against the same scenes and the run's own events.
A whole program (in-process) because the command itself is the claim: capture, sampling, change-only ingest, the
standing question, the watch and the timeline writer all stand between the model and what it says. (Through this
path, not a session fed by hand, the capture's frame box was found to cut the model's 140x84 frames to 112x56:
model/adapters/qwen2_vl.py frame_size.)"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import logging
from pathlib import Path

import pytest

from app.__main__ import main
from tests.support.app_helpers import app_command
from timeline import TimelineReader
from timeline.period import Period

REPO = Path(__file__).resolve().parents[2]
DURATION_S = 50.0  # the demo's five 10-s scenes: red ball, green square, yellow triangle, white car, purple ball
CLIP_S = 4.0  # --every 4: one answer per 4-s clip


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """(exit code, stderr, the events of the run, the video's scenes, the run's timeline)."""
    folder = tmp_path_factory.mktemp("demo")
    spec = importlib.util.spec_from_file_location("make_demo_video", REPO / "scripts/make_demo_video.py")
    maker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(maker)
    video = folder / "demo.mp4"
    maker.main(["--duration", str(DURATION_S), "--out", str(video)])
    log, timeline, config = folder / "events.jsonl", folder / "timeline.sqlite", folder / "watch.toml"
    car = 'question = "Is there a car?"\nevery = 2\nthreshold = 0.5\non_after = 1\noff_after = 1\n'
    config.write_text(f"[alerts.car]\n{car}")
    argv = app_command(
        "--model", "demo", "--video", str(video), "--no-realtime", "--every", str(CLIP_S), "--quiet",
        "--log-jsonl", str(log), "--timeline", str(timeline), "--config", str(config),
    )[3:]  # fmt: skip
    root = logging.getLogger()
    kept, level = root.handlers[:], root.level
    root.handlers.clear()  # the run's logging.basicConfig writes into `err`
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            code = main(argv)
    finally:
        root.handlers[:] = kept
        root.setLevel(level)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    scenes = json.loads((folder / "demo.mp4.scenes.json").read_text())
    return code, err.getvalue(), records, scenes, timeline


def of_type(records: list[dict], kind: str) -> list[dict]:
    return [r for r in records if r["type"] == kind]


def caption_at(scenes: list[dict], t: float) -> str:
    return next(s["caption"] for s in scenes if s["start_s"] <= t < s["end_s"])


def one_scene(scenes: list[dict], answer: dict) -> bool:
    """Whether the answer's 4-s clip lies in one scene."""
    return caption_at(scenes, answer["stream_time"] - CLIP_S) == caption_at(scenes, answer["stream_time"] - 1.0)


def test_the_demo_model_names_the_colour_and_the_background_on_screen(demo_run):
    """Every answer names the colour of the thing on screen and the background it is on, in the ground truth's
    words. The kind is not checked: the shipped weights name it in 10 of 12 clips, taking the first ball for a
    triangle and the purple ball for a square (docs/demo-model.md). A clip that straddles a scene change (28-32 s:
    two frames of the triangle, two of the car) is not checked: the model reads frames in pairs and names what the
    clip holds."""
    code, err, records, scenes, _ = demo_run
    assert code == 0, err
    answers = of_type(records, "answer")
    assert len(answers) >= 10
    wrong = []
    whole = [a for a in answers if one_scene(scenes, a)]
    assert len(whole) >= 10
    for answer in whole:
        # each answer is about the newest frame the model saw: the last second of its 4-s clip
        truth = caption_at(scenes, answer["stream_time"] - 1.0)
        colour, background = truth.split()[1], truth.split(" on ", 1)[1]
        said = answer["answer"].strip().rstrip(".")
        if not (said.split()[1:2] == [colour] and said.endswith(" on " + background)):
            wrong.append((answer["stream_time"], said, truth))
    assert not wrong, f"{len(wrong)} of {len(whole)} answers miss the colour or the background: {wrong}"


def test_the_recap_breaks_its_runs_at_every_scene_change_and_never_spans_two_scenes(demo_run):
    """The recap of the run's timeline: consecutive equal answers become one run. At each of the four scene changes
    a run ends within one clip (the answers name the new background), and no run holds answers of two scenes.
    Runs within a scene are also broken where the shipped weights misname the kind of thing (a square called a
    ball); docs/demo-model.md counts them, so they are not checked here."""
    code, err, records, scenes, timeline = demo_run
    assert code == 0, err
    with TimelineReader(timeline) as reader:
        recap = reader.recap(Period(0.0, 4e9), max_lines=200)
    runs = [line for line in recap.lines if line.kind == "answers"]
    assert sum(run.count for run in runs) == len(of_type(records, "answer"))
    for run in runs:  # the scene of its first answer's newest frame is the scene of its last answer's
        assert caption_at(scenes, run.start_s - 1.0) == caption_at(scenes, run.end_s - 1.0), run
    ends = [run.end_s for run in runs]
    for change in (scene["start_s"] for scene in scenes[1:]):
        assert any(change <= end < change + CLIP_S or change - CLIP_S <= end < change for end in ends), (change, ends)


def test_the_car_watch_turns_on_and_off_with_the_car_scene(demo_run):
    """The watch "Is there a car?" at p_yes 0.5 begins once, at the first check after the white car's scene starts
    (within one clip of it), and ends within one clip of its end; no other scene turns it on."""
    code, err, records, scenes, _ = demo_run
    assert code == 0, err
    (car,) = [s for s in scenes if " car " in s["caption"]]
    alerts = [(r["state"], r["stream_time"]) for r in of_type(records, "alert") if r["alert"] == "car"]
    checks = [(r["stream_time"], r["p_yes"]) for r in of_type(records, "check") if r["alert"] == "car"]
    assert [state for state, _ in alerts] == ["begin", "end"], (alerts, checks)
    (_, began), (_, ended) = alerts
    assert car["start_s"] < began <= car["start_s"] + CLIP_S, (alerts, checks)
    assert car["end_s"] < ended <= car["end_s"] + CLIP_S, (alerts, checks)


def test_the_summary_of_the_watch_equals_its_alerts_in_the_run(demo_run):
    """How many times the car watch began and how long it was on, from the timeline, against the alert events the
    run printed (its end: the assistant stopping when the video ended)."""
    code, err, records, _, timeline = demo_run
    assert code == 0, err
    alerts = [r for r in of_type(records, "alert") if r["alert"] == "car"]
    begins = [r for r in alerts if r["state"] == "begin"]
    assert begins, "the car watch never began"
    with TimelineReader(timeline) as reader:
        summary = reader.summary(Period(0.0, 4e9), watch="car")
    (car,) = summary.watches
    assert car.began == len(begins)
    assert car.on_s == pytest.approx(sum(r["duration_s"] for r in alerts if r["state"] == "end"), abs=1e-3)
    assert car.on_now == (len(begins) > len(alerts) - len(begins))
