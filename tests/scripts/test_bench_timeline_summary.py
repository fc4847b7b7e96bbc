"""The summary benchmark's smoke run: a small generated day on SQLite, every query measured once, CSV and PNG
written; and its generator's alerts add up to what the summary reports (the numbers it times are the real ones)."""

from __future__ import annotations

import csv
import time

from scripts.bench_timeline_summary import busy_rows, fill, main
from timeline import TimelineReader
from timeline.period import DAY_S, Period


def test_a_small_run_writes_every_query_to_the_csv_and_the_plot(tmp_path):
    assert main(["--rows", "400", "--backends", "sqlite", "--repeats", "1", "--out", str(tmp_path)]) == 0
    rows = list(csv.DictReader(open(tmp_path / "timeline_summary.csv")))
    assert [row["query"] for row in rows] == [
        "summary, day", "summary, day per hour", "summary, one watch", "recap, last hour", "recap, day"]  # fmt: skip
    assert all(float(row["median_ms"]) > 0 for row in rows)
    assert (tmp_path / "timeline_summary.png").stat().st_size > 1000


def test_the_generated_day_is_summed_up_exactly(tmp_path):
    now = time.time()
    rows = busy_rows(2000, streams=3, watches=5, until=now)
    fill(tmp_path / "t.sqlite", rows, now)
    begins = [row for row in rows if row.kind == "alert" and row.state == "begin"]
    ends = {row.alert_id: row for row in rows if row.kind == "alert" and row.state == "end"}
    expected_on = sum(ends[b.alert_id].duration_s if b.alert_id in ends else now - b.t_wall for b in begins)
    with TimelineReader(tmp_path / "t.sqlite") as reader:
        summary = reader.summary(Period(now - DAY_S, now))
    assert sum(w.began for w in summary.watches) == len(begins)
    assert abs(sum(w.on_s for w in summary.watches) - expected_on) < 0.01 * len(begins)
    assert sum(s.answers for s in summary.streams) == sum(1 for row in rows if row.kind == "answer")
