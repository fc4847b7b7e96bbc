"""The video QA benchmark's parts on a short stream: each setup answers its probes, the scoring and the watch
metrics count what they say (the full run, 6 streams of 12 minutes, is by hand: README, docs/video-qa.md)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from capture.scenes import Scene, Stream, Thing
from quality.video_plan import Probe
from quality.video_qa import exists_now, exists_past

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_video_qa", REPO / "scripts/bench_video_qa.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_video_qa"] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_every_setup_answers_the_same_probes(bench):
    stream = Stream(
        (
            Scene(0.0, 8.0, "sand", (Thing("square", "green", 0.0, 8.0),)),
            Scene(8.0, 16.0, "a dark night sky", (Thing("triangle", "yellow", 8.0, 16.0),)),
        )
    )
    probes = [
        Probe(16.0, exists_now("a yellow triangle", stream, 15.0), 0.0),
        Probe(16.0, exists_past("a green square", stream, 15.0), 8.0),
    ]
    models = {"fp32": bench.load_demo()}
    clips = bench.clips_of(stream)
    assert [(t0, t1) for _, t0, t1 in clips] == [(0.0, 4.0), (4.0, 8.0), (8.0, 12.0), (12.0, 16.0)]
    for name in ("simplestream", "window", "default"):
        watches = ["Is there a person?"] if name == "default" else []
        rows, watched = bench.run_setup(models, bench.SETUPS[name], 0, stream, probes, clips, 256, watches)
        assert [r["question"] for r in rows] == [p.question.text for p in probes]
        assert all(isinstance(r["answer"], str) and r["setup"] == name for r in rows)
        assert len(watched) == (len(clips) if watches else 0)
        assert not any(r["truth"] for r in watched)  # nobody in this stream


def test_wilson_intervals_and_delay_buckets(bench):
    low, high = bench.wilson(9, 10)
    assert 0.55 < low < 0.9 < high <= 1.0
    assert bench.wilson(0, 10)[0] == 0.0
    assert [bench.delay_bucket(d) for d in (0, 3, 62, 185, 598)] == ["now", "now", "1 min", "3 min", "10 min"]


def test_watch_scoring_counts_precision_recall_and_lateness(bench):
    truth = [False, True, True, True, False, False]
    p_yes = [0.1, 0.2, 0.9, 0.8, 0.7, 0.1]  # begins a clip late, ends a clip late
    pairs = enumerate(zip(p_yes, truth, strict=True))
    rows = [{"setup": "default", "seed": 0, "watch": "w", "t": i, "p_yes": p, "truth": t} for i, (p, t) in pairs]
    (scored,) = bench.score_watches(rows)
    assert scored["precision"] == round(2 / 3, 3) and scored["recall"] == round(2 / 3, 3)
    assert scored["begins"] == 1 and scored["begin_late_clips"] == 1 and scored["end_late_clips"] == 1
