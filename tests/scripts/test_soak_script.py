"""scripts/soak.py --analyze: the slopes it reports after warm-up are the least-squares slopes of the log."""

import csv
import json
import subprocess
import sys

import pytest

from tests.support.app_helpers import REPO

MIB = 2**20


def answer(hour: float) -> dict:
    warm = min(hour, 2.0)  # everything settles after 2 h, except RSS, which keeps leaking 3 MiB/h
    return {
        "type": "answer", "t_wall": 0.0, "stream_time": hour * 3600,
        "process_rss_bytes": int((400 + 50 * warm + 3 * hour) * MIB), "kv_bytes": MIB,
        "store_tokens": int(1000 * warm), "store_bytes": int(8 * MIB * warm / 2),
        "process_threads": 14, "process_open_fds": 6 + (hour % 1 < 0.5),
    }  # fmt: skip


def test_slopes_after_warm_up_find_the_one_leak(tmp_path):
    log = tmp_path / "events.jsonl"
    log.write_text("".join(json.dumps(answer(k / 30)) + "\n" for k in range(1, 30 * 24 + 1)))
    out_csv, png = tmp_path / "slopes.csv", tmp_path / "soak.png"
    done = subprocess.run(
        [sys.executable, "scripts/soak.py", "--analyze", str(log), "--csv", str(out_csv), "--plot", str(png)],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    slopes = {row["quantity"]: row for row in csv.DictReader(out_csv.open())}
    assert float(slopes["process_rss_bytes"]["slope_per_h"]) == pytest.approx(3.0, rel=1e-3)
    for flat in ("kv_bytes", "store_tokens", "store_bytes", "process_threads"):
        assert abs(float(slopes[flat]["slope_per_h"])) < 1e-6
    assert abs(float(slopes["process_open_fds"]["slope_per_h"])) < 0.01  # oscillates, does not grow
    assert slopes["store_tokens"]["fit_from_h"] == "12.000" and slopes["store_tokens"]["max"] == "2000"
    assert "| process RSS (MiB) |" in done.stdout and png.read_bytes()[:4] == b"\x89PNG"
