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
    monkeypatch.setenv("EDGE_ASSISTANT_DATA", str(tmp_path / "data"))  # the script points it at its own folder
    bench.main(["--quick", "--no-head-kill", "--out", str(tmp_path)])  # the head's kill: the test below, and
    # tests/fleet/test_fleet_head_killed.py runs the scenario itself
    with (tmp_path / "fleet_loss.csv").open() as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == bench.COLUMNS
        rows = list(reader)
    kills = [r for r in rows if r["part"] == "host kill -9"]
    assert {r["sink"] for r in kills} == {"head's bus", "broker (MQTT)", "timeline (SQLite)"}
    for r in kills:
        assert int(r["made"]) >= 4 + bench.WATCHES and int(r["at_stake"]) > 0, r
        assert int(r["delivered"]) == int(r["made"]) and r["lost"] == "0" and r["duplicated"] == "0", r
    assert not [r for r in rows if r["part"] == "head kill -9"]
    logs = {r["setting"]: r for r in rows if r["part"] == "event log burst"}
    for setting, r in logs.items():
        assert r["made"] == "10000" and r["duplicated"] == "0", r
        if "never-drop" in setting:
            assert r["lost"] == "0" and r["delivered"] == "10000", r
    assert int(logs["slow file (20k lines/s), drop-oldest queue (before)"]["lost"]) > 0  # what the log lost before
    assert (tmp_path / "fleet_loss.png").stat().st_size > 10_000


def test_a_head_kill_is_counted_per_sink(tmp_path, monkeypatch):
    # what the scenario (tests/support/head_kill.py) left, made up: 3 made, the first acknowledged before the kill;
    # the timeline got each once, the broker one twice, the webhook missed one
    import tests.support.head_kill as scenario

    made = {("answer", 1, 1.0): "s:1", ("answer", 2, 2.0): "s:2", ("alert", "a", "begin"): "s:3"}
    a, b, c = made
    left = scenario.HeadKill(
        made=made, acked={"s": 1}, webhook_at_kill={a}, timeline=[a, b, c], broker=[a, b, b, c], webhook=[a, b],
        recovery_s=4.0,
    )  # fmt: skip
    monkeypatch.setattr(scenario, "head_kill", lambda work: left)
    monkeypatch.setenv("EDGE_ASSISTANT_DATA", str(tmp_path / "data"))
    rows = {r["sink"]: r for r in load().head_kill_run(tmp_path, 1)}
    assert rows["timeline (SQLite)"]["setting"] == "run 1: 2 answers + 1 alerts"
    assert [(r["made"], r["at_stake"], r["delivered"], r["duplicated"], r["lost"]) for r in rows.values()] == [
        (3, 2, 3, 0, 0),
        (3, 2, 3, 1, 0),
        (3, 2, 2, 0, 1),
    ]
    assert "2 unanswered at the kill" in rows["webhook"]["note"]
