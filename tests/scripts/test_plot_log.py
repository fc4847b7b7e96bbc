"""scripts/plot_log.py turns real event logs into a PNG, and refuses logs it cannot plot."""

import importlib.util
import subprocess
import sys

from tests.support.app_helpers import REPO, video
from tests.support.in_process_main import run_app_here


def load():
    spec = importlib.util.spec_from_file_location("plot_log", REPO / "scripts" / "plot_log.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_plots_a_real_log_and_rejects_bad_ones(tmp_path, capsys):
    log = tmp_path / "inf-mllm.jsonl"
    done = run_app_here("--video", str(video(20)), "--model", "tiny", "--no-realtime", "--every", "10",
                        "--budget", "128", "--window", "8", "--max-new-tokens", "4", "--quiet",
                        "--log-jsonl", str(log))  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    png = tmp_path / "memory.png"
    plot = [sys.executable, "scripts/plot_log.py"]  # the command itself, once
    ok = subprocess.run([*plot, str(log), "--out", str(png)], cwd=REPO, capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"type": "status", "t_wall": 1.0, "message": "hi"}\n')
    assert load().main([str(empty), "--out", str(png)]) == 2  # in-process: `sys.exit(main())` is the exit code
    assert "no answer events" in capsys.readouterr().err
