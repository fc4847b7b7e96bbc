"""scripts/bench_ingest.py: the ground truth on the token grid, and a --quick run on the tiny model end to end."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

import numpy as np

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def load():
    if "bench_ingest" in sys.modules:
        return sys.modules["bench_ingest"]
    spec = importlib.util.spec_from_file_location("bench_ingest", SCRIPTS / "bench_ingest.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_ingest"] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


def test_a_box_marks_the_token_regions_it_overlaps_in_the_resized_view():
    bench = load()
    # a 640x480 video seen as 224x168 (8x6 regions of 28 px): x scale 0.35
    mask = bench.region_mask([(100, 100, 180, 200)], (640, 480), (168, 224), 28)
    # x 35-63 px -> columns 1-2; y 35-70 px -> rows 1-2
    assert mask.shape == (6, 8)
    assert sorted(zip(*np.nonzero(mask), strict=True)) == [(1, 1), (1, 2), (2, 1), (2, 2)]
    assert not bench.region_mask([], (640, 480), (168, 224), 28).any()
    edge = bench.region_mask([(600, 0, 640, 10)], (640, 480), (168, 224), 28)  # at the frame's edge
    assert edge[0, 7] and edge.sum() == 1


def test_object_and_static_tokens_are_scored_against_what_was_kept():
    bench = load()
    keep = np.zeros((2, 6, 8), dtype=bool)
    keep[0, 1:3, 1:3] = True  # group 0 kept the object
    keep[1, 1, 1] = True  # group 1 kept a quarter of it
    box = [(100, 100, 180, 200)]
    truth = bench.score_selection(keep, [box, box], [], (640, 480), (168, 224), 28)
    assert (truth.object_tokens, truth.object_kept) == (8, 5)
    # static: never under the box (this group's or the previous one's): 44 regions per group, all dropped
    assert (truth.static_tokens, truth.static_dropped) == (88, 88)
    moved = bench.score_selection(keep, [[], []], box, (640, 480), (168, 224), 28)
    assert moved.object_tokens == 0 and moved.static_tokens == 44 + 48  # what the object left changes too


def test_quick_run_on_the_tiny_model_writes_csv_plot_and_table(tmp_path):
    out = tmp_path / "out"
    argv = ["--quick", "--shapes", "tiny", "--out", str(out), "--videos-dir", str(tmp_path / "videos")]
    table = load().main(argv)
    rows = list(csv.DictReader((out / "bench_ingest.csv").open()))
    assert len(rows) == 3 * 3 * 2  # videos x clips x modes
    off = [r for r in rows if r["mode"] == "off"]
    assert all(r["visual_tokens_kept"] == r["visual_tokens"] for r in off)  # dropping off: every clip whole
    static_on = [r for r in rows if r["video"] == "static" and r["mode"] == "on"]
    assert static_on[0]["keyframe"] == "True" and static_on[0]["visual_tokens_kept"] == static_on[0]["visual_tokens"]
    assert all(int(r["visual_tokens_kept"]) < int(r["visual_tokens"]) for r in static_on[1:])
    moving_on = [r for r in rows if r["video"] == "moving" and r["mode"] == "on"]
    assert sum(int(r["object_tokens"]) for r in moving_on) > 0  # the object was in view and scored
    summary = {r["video"]: r for r in csv.DictReader((out / "bench_ingest_summary.csv").open())}
    assert set(summary) == {"static", "moving", "demo"}
    assert float(summary["static"]["dropped_share"]) > 0 and summary["demo"]["object_kept_share"] == ""
    assert float(summary["static"]["horizon_s_on"]) > float(summary["static"]["horizon_s_off"])
    assert (out / "bench_ingest.png").stat().st_size > 10_000
    assert "| tiny | static |" in table and "Machine: " in table and "cores" in table


def test_the_keyframe_sweep_weighs_one_whole_clip_per_interval():
    bench = load()

    def row(clip, mode, cpu_ms, keyframe):
        return dict(shape="s", video="static", clip=clip, mode=mode, cpu_ms=cpu_ms, keyframe=keyframe)

    rows = [row(0, "off", 999.0, True), row(0, "on", 999.0, True)]  # the warm-up clip is left out
    rows += [row(c, "off", 40.0, True) for c in (1, 2, 3)] + [row(c, "on", 4.0, False) for c in (1, 2, 3)]
    sweep = bench.keyframe_sweep(rows, [1, 4, 36], clip_seconds=4.0)
    assert [s["keyframe_every"] for s in sweep] == [1, 4, 36]
    assert [s["cpu_ms_on"] for s in sweep] == [40.0, 13.0, 5.0]  # 40/N + 4 (N-1)/N
    assert sweep[2]["minutes"] == 2.4 and sweep[1]["streams_on"] == round(4000 / 13, 2)
    assert "| s | static | 36 clips (2.4 min) | 5 |" in bench.sweep_markdown(sweep)
