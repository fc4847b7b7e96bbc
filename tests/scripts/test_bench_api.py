"""scripts/bench_api.py --quick (a smoke run: one question per route, one feed setting, one watch setting): the API
served by `python -m app --api --model tiny`, measured end to end; the CSV has its columns and every measured row a
positive figure (counts may be 0); the MQTT command route (the script's own mosquitto) is measured too. No time is
checked; the full sweep (8 questions, 1/10/50 clients, 0/100/100 watches) is run by hand."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

from tests.support.mqtt_broker import require_mosquitto

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
    require_mosquitto()  # skips without it, fails under EDGE_ASSISTANT_REQUIRE_TOOLS=1
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
    mqtt = {r["measure"]: r for r in rows if r["setting"] == bench.MQTT_ROUTE}
    assert set(mqtt) == {"answer_ms", "ttft_ms", "in_process_ms", "overhead_ms", "delivery_ms"}
    assert {r["samples"] for r in mqtt.values()} == {"1"}  # every question asked over MQTT was answered there
    by = {measure: float(r["value"]) for measure, r in mqtt.items()}  # the answer comes whole: after its decode
    assert by["ttft_ms"] < by["in_process_ms"] < by["answer_ms"] and by["overhead_ms"] > 0
    feeds = {r["setting"] for r in rows if r["part"] == "feed"}
    assert feeds == {"2 clients, 2 s"}
    clients = [r for r in rows if r["measure"] == "events_per_s_per_client"]
    assert [int(r["samples"]) for r in clients] == [2]  # one figure per client
    watches = {r["setting"]: r for r in rows if r["measure"] == "checks_per_stream_s"}
    assert set(watches) == {"3 watches, every 2 s"}
    assert float(watches["3 watches, every 2 s"]["value"]) > 0  # the watches added through the API were checked
    assert (tmp_path / "api_bench.png").stat().st_size > 10_000
