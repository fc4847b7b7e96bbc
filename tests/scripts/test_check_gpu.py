"""scripts/check_gpu.py: its dry run on the CPU passes, and a failing check makes the verdict FAIL.

The CUDA paths themselves need a GPU; here the same checks run on the CPU in fp32 (CUDA-only ones SKIP).
"""

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from scripts.check_gpu import CHECKS, Context, Greedy, Result, check_memory, compare, main, run_checks

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check_gpu.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )


def test_dry_run_on_the_cpu_passes_every_check_or_skips_the_cuda_ones():
    done = _run("--device", "cpu", "--skip-timings")  # the command itself, in a process of its own (torch.compile)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    statuses = {}
    for name, _ in CHECKS:
        line = next((line for line in lines if line.startswith(name)), None)
        if name == "timings":
            assert line is None  # --skip-timings
            continue
        assert line is not None, f"no line for {name!r}:\n{done.stdout}"
        statuses[name] = line[30:].split()[0]
    assert statuses.pop("NVML readings") == "SKIP"
    assert set(statuses.values()) == {"PASS"}, done.stdout
    assert "skipped (CPU)" in done.stdout
    assert any(line.startswith("verdict: PASS") for line in lines)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_asking_for_cuda_without_it_exits_2_and_points_to_the_dry_run(capsys):
    assert main(["--device", "cuda"]) == 2  # in-process: `sys.exit(main())` is the script's exit code
    out, err = capsys.readouterr()
    assert "CUDA is not available" in err and "--device cpu" in err
    assert "verdict" not in out


def test_a_failing_or_crashing_check_makes_the_verdict_fail():
    def crash(ctx):
        raise RuntimeError("no kernel image is available")

    ctx = Context(torch.device("cpu"), torch.float32)
    lines = []
    checks = [
        ("fine", lambda ctx: Result("PASS", "ok")),
        ("not here", lambda ctx: Result("SKIP", "skipped (CPU)")),
        ("wrong", lambda ctx: Result("FAIL", "3 tokens differ")),
        ("crashes", crash),
    ]
    assert run_checks(checks, ctx, emit=lines.append) == 1
    assert lines[2].split()[1] == "FAIL" and "3 tokens differ" in lines[2]
    assert lines[3].split()[1] == "FAIL" and "RuntimeError: no kernel image is available" in lines[3]
    assert lines[-1].startswith("verdict: FAIL") and "wrong, crashes" in lines[-1]
    assert run_checks(checks[:2], ctx, emit=lines.append) == 0
    assert lines[-1].startswith("verdict: PASS")


def test_the_memory_check_fails_a_cache_that_keeps_growing():
    ctx = Context(torch.device("cpu"), torch.float32, compile=False)
    assert check_memory(ctx, policy="full").status == "FAIL"  # never evicts: a clip's KV more every clip
    assert check_memory(ctx, policy="inf-mllm").status == "PASS"


def _greedy(rows: list[list[float]]) -> Greedy:
    logits = [torch.tensor(r) for r in rows]
    return Greedy([int(r.argmax()) for r in logits], logits)


def test_greedy_decodings_agree_only_up_to_a_near_tie():
    ctx = Context(torch.device("cpu"), torch.bfloat16)  # tolerance: 8 eps(bf16) = 0.0625 on logits below 1
    expected = _greedy([[0.9, 0.1, 0.0], [0.5, 0.49, 0.0], [0.0, 0.0, 1.0]])
    assert compare(ctx, expected, expected)[0]
    flipped = _greedy([[0.9, 0.1, 0.0], [0.49, 0.5, 0.0], [1.0, 0.0, 0.0]])  # a near-tie, then anything
    same, note = compare(ctx, expected, flipped)
    assert same and "near-tie" in note
    expected = _greedy([[0.9, 0.1, 0.0], [0.5, 0.43, 0.0]])
    wrong = _greedy([[0.9, 0.1, 0.0], [0.44, 0.49, 0.0]])  # logits within the tolerance, but the margin is wider
    assert not compare(ctx, expected, wrong)[0]
    far = _greedy([[0.9, 0.3, 0.0], [0.5, 0.43, 0.0]])  # same tokens, logits too far apart
    assert not compare(ctx, expected, far)[0]
    assert not compare(ctx, expected, _greedy([[0.9, 0.1, 0.0]]))[0]  # fewer tokens
