"""scripts/bench_int8.py --quick (one decode row, a block of 256 vision rows, one passage): every variant timed at
every row count it takes, the CSV has its columns, and the quality rows relate as they must on the real reference
LM: int8 changes the perplexity; sparing the MLP's down projections and the LM head (where activation outliers are)
brings it closer to fp32's, as does SmoothQuant's rescaling; one scale per input row (per token) beats FBGEMM's one
per input, and the rescaling brings it closer still; what `--quantize int8` ships (the kernel, a scale per 64
inputs) stays within the stated tolerance (3%). No time is checked."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

from tests.support.reference_lm import reference_lm

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def load():
    if "bench_int8" in sys.modules:
        return sys.modules["bench_int8"]
    spec = importlib.util.spec_from_file_location("bench_int8", SCRIPTS / "bench_int8.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_int8"] = module
    spec.loader.exec_module(module)
    return module


def test_quick_run_measures_each_variant_and_relates_the_quality_rows(tmp_path):
    reference_lm()  # skips (or fails in CI) when the reference is not set up
    bench = load()
    bench.main(["--quick", "--out", str(tmp_path)])
    with (tmp_path / "int8_bench.csv").open() as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == bench.COLUMNS
        rows = list(reader)
    speed = [r for r in rows if r["part"].startswith("speed")]
    assert {(r["part"], r["variant"], int(r["rows"])) for r in speed} >= {
        ("speed: decoder layer", "fp32", 1), ("speed: decoder layer", "int8 dynamic", 1),
        ("speed: vision block", "int8 dynamic", 256), ("speed: decoder layer", "--quantize int8 (kernel)", 1),
        ("speed: vision block", "--quantize int8 (kernel)", 256),
    }  # fmt: skip
    assert all(float(r["value"]) > 0 for r in speed)
    bound = {r["variant"]: float(r["value"]) for r in rows if r["measure"] == "bound_ms"}
    assert bound["fp32"] > 0 and abs(bound["int8"] * 4 - bound["fp32"]) < 0.01  # a quarter of the bytes
    errors = {r["variant"]: float(r["note"].split("max relative error ")[1]) for r in speed}
    assert 0 < errors["int8 dynamic"] < 0.1  # quantized, yet close to fp32 layer by layer
    assert 0 < errors["--quantize int8 (kernel)"] < 0.1
    assert errors["fp32"] == 0
    ppl = {r["variant"]: float(r["value"]) for r in rows if r["measure"] == "perplexity"}
    assert 1 < ppl["fp32"] < 200  # the real model on English verse
    spared = ppl["int8 dynamic, sparing down_proj and lm_head"]
    assert ppl["fp32"] != ppl["int8 dynamic"]
    assert abs(spared - ppl["fp32"]) < abs(ppl["int8 dynamic"] - ppl["fp32"])
    off = {variant: abs(value - ppl["fp32"]) for variant, value in ppl.items()}
    assert off["int8 dynamic + SmoothQuant"] < off["int8 dynamic"]
    per_row, smoothed = off["int8 one scale per row (emulated)"], off["int8 one scale per row + SmoothQuant (emulated)"]
    assert smoothed < per_row < off["int8 dynamic"]
    shipped = ppl["--quantize int8 (kernel)"]
    assert shipped != ppl["fp32"] and shipped / ppl["fp32"] < 1.03
    assert (tmp_path / "int8_bench.png").stat().st_size > 10_000
