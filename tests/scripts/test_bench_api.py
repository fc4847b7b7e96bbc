"""scripts/bench_api.py --quick: the API served by `python -m app --api --model tiny`, measured end to end; the CSV
has its columns and every measured row a positive figure (counts may be 0). No time is checked."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def load():
    if "bench_api" in sys.modules:
        return sys.modules["bench_api"]
    spec = importlib.util.spec_from_file_location("bench_api", SCRIPTS / "bench_api.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_api"] = module
    spec.loader.exec_module(module)
    return module


def test_quick_run_writes_the_csv_and_the_plot(tmp_path):
    bench = load()
    bench.main(["--quick", "--out", str(tmp_path)])
    with (tmp_path / "api_bench.csv").open() as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == bench.COLUMNS
        rows = list(reader)
    assert {r["part"] for r in rows} == {"first_piece", "feed", "watches"}
    measured = [r for r in rows if int(r["samples"]) > 0]
    for r in measured:
        value = float(r["value"])
        assert value >= 0 if r["unit"] in bench.COUNT_UNITS else value > 0, r
        assert float(r["load_1m"]) >= 0
    routes = {r["setting"] for r in measured if r["measure"] == "first_piece_ms"}
    assert routes == {"POST /api/v1/ask (SSE, httpx)", "/v1/chat/completions (stream, openai)"}
    for route in routes:  # the in-process ttft is part of the first piece, so the overhead is what is left
        by = {r["measure"]: float(r["value"]) for r in measured if r["setting"] == route}
        assert by["ttft_ms"] < by["first_piece_ms"] and by["overhead_ms"] > 0
    (mqtt,) = [r for r in rows if r["setting"].startswith("MQTT")]
    assert mqtt["samples"] == "0" and mqtt["value"] == "" and mqtt["note"]
    feeds = {r["setting"] for r in rows if r["part"] == "feed"}
    assert feeds == {"1 client, 2 s", "3 clients, 2 s"}
    clients = [r for r in rows if r["measure"] == "events_per_s_per_client"]
    assert [int(r["samples"]) for r in clients] == [1, 3]  # one figure per client
    watches = {r["setting"]: r for r in rows if r["measure"] == "checks_per_stream_s"}
    assert float(watches["3 watches, every 2 s"]["value"]) > 0  # the watches added through the API were checked
    assert (tmp_path / "api_bench.png").stat().st_size > 10_000
