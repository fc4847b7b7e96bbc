"""scripts/bench_fleet_loss.py --quick: a host killed with SIGKILL after a burst on a real Ray cluster, the head killed
with a burst in its outputs, and an event log burst; the CSV has its columns, nothing is lost or delivered twice
where the project promises it (every sink of the host's kill, the timeline after the head's, the never-dropping log),
and the plot is written. No time is checked."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

import pytest

from cache.cpu.kernels import share_built_kernels

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"

pytest.importorskip("ray")


def load():
    if "bench_fleet_loss" in sys.modules:
        return sys.modules["bench_fleet_loss"]
    spec = importlib.util.spec_from_file_location("bench_fleet_loss", SCRIPTS / "bench_fleet_loss.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_fleet_loss"] = module
    spec.loader.exec_module(module)
    return module


def test_quick_run_counts_zero_lost_and_zero_duplicated(tmp_path, monkeypatch):
    bench = load()
    share_built_kernels(tmp_path / "data")  # the CPU kernels already built, not a build for this test
    monkeypatch.setenv("EDGE_ASSISTANT_DATA", str(tmp_path / "data"))  # the script points it at its own folder
    bench.main(["--quick", "--out", str(tmp_path)])
    with (tmp_path / "fleet_loss.csv").open() as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == bench.COLUMNS
        rows = list(reader)
    kills = [r for r in rows if r["part"] == "host kill -9"]
    assert {r["sink"] for r in kills} == {"head's bus", "broker (MQTT)", "timeline (SQLite)"}
    for r in kills:
        assert int(r["made"]) >= 4 + bench.WATCHES and int(r["at_stake"]) > 0, r
        assert int(r["delivered"]) == int(r["made"]) and r["lost"] == "0" and r["duplicated"] == "0", r
    heads = {r["sink"]: r for r in rows if r["part"] == "head kill -9"}
    assert set(heads) == {"timeline (SQLite)", "broker (MQTT)", "webhook"}
    for r in heads.values():
        assert int(r["made"]) > 0 and int(r["at_stake"]) > 0 and r["lost"] == "0", r
    assert heads["timeline (SQLite)"]["duplicated"] == "0"  # the broker and the webhook: at least once
    logs = {r["setting"]: r for r in rows if r["part"] == "event log burst"}
    for setting, r in logs.items():
        assert r["made"] == "10000" and r["duplicated"] == "0", r
        if "never-drop" in setting:
            assert r["lost"] == "0" and r["delivered"] == "10000", r
    assert int(logs["slow file (20k lines/s), drop-oldest queue (before)"]["lost"]) > 0  # what the log lost before
    assert (tmp_path / "fleet_loss.png").stat().st_size > 10_000
