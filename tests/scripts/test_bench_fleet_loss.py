"""scripts/bench_fleet_loss.py --quick (a smoke run): the event log bursts through the CSV and the plot; nothing is lost
or delivered twice where the project promises it (the never-dropping log). The two kills' scenarios run in their
own tests (a host's: tests/fleet/test_fleet_nothing_lost.py, the same assertions per sink; the head's:
tests/fleet/test_fleet_head_killed.py); here their counting is checked on made-up results. No time is checked."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


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
    bench.main(["--quick", "--no-head-kill", "--no-host-kill", "--out", str(tmp_path)])
    with (tmp_path / "fleet_loss.csv").open() as f:
        reader = csv.DictReader(f)
        assert reader.fieldnames == bench.COLUMNS
        rows = list(reader)
    assert not [r for r in rows if r["part"] != "event log burst"]  # both kills skipped
    logs = {r["setting"]: r for r in rows}
    assert len(logs) == 3
    for setting, r in logs.items():
        assert r["made"] == "10000" and r["duplicated"] == "0", r
        if "never-drop" in setting:
            assert r["lost"] == "0" and r["delivered"] == "10000", r
    assert int(logs["slow file (20k lines/s), drop-oldest queue (before)"]["lost"]) > 0  # what the log lost before
    assert (tmp_path / "fleet_loss.png").stat().st_size > 10_000


def test_a_host_kill_is_counted_per_sink():
    """What a sink saw against what the host made: another stream's records do not count, a repeat is a duplicate,
    a record never seen is lost; alerts are told apart by (id, state) on the bus and (name, state, time) in the
    timeline."""
    bench = load()
    answer = {"type": "answer", "question": "q1"}
    begin = {"type": "alert", "id": "s:7", "state": "begin", "alert": "door", "t_wall": 10.00049}
    end = {"type": "alert", "id": "s:7", "state": "end", "alert": "door", "t_wall": 12.0}
    made = [bench.key(r) for r in (answer, begin, end)]
    assert made == [("answer", "q1"), ("alert", "s:7", "begin"), ("alert", "s:7", "end")]
    assert bench.row_key(begin) == ("alert", "door", "begin", 10.0)
    seen = [made[0], ("answer", "another stream's"), made[1], made[1]]
    row = bench.counted("host kill -9", "run 1", "head's bus", made, seen, 2, 1.5)
    assert (row["made"], row["at_stake"], row["delivered"], row["duplicated"], row["lost"]) == (3, 2, 2, 1, 1)
    assert list(row) == bench.COLUMNS


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
