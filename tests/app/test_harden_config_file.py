"""`--config FILE` is read bounded (issue 39): deep nesting, bytes that are not UTF-8, `/dev/zero`, a FIFO and a
huge file each end in one clear message and exit code 2, never a traceback, a MemoryError or a hang."""

from __future__ import annotations

import os
import resource
import subprocess
import sys

import pytest

from app.cli import parse_args
from tests.support.app_helpers import REPO


def _refused(path, capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        parse_args(["--video", "x.mp4", "--config", str(path)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


@pytest.mark.parametrize("nesting", ["a = " + "[" * 100_000, "a = " + "{b=" * 100_000, "[" + "a." * 100_000 + "b]"])
def test_deep_nesting_is_refused(tmp_path, capsys, nesting: str) -> None:
    path = tmp_path / "deep.toml"
    path.write_text(nesting)
    assert "cannot read --config" in _refused(path, capsys)


def test_bytes_that_are_not_utf8_are_refused(tmp_path, capsys) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes('question = "caf\xe9"\n'.encode("latin-1"))
    assert "not UTF-8" in _refused(path, capsys)


def test_a_huge_file_is_refused(tmp_path, capsys) -> None:
    path = tmp_path / "huge.toml"
    path.write_text("# " + "x" * (2 << 20) + "\n")
    assert "larger than" in _refused(path, capsys)


def _parse_in_a_child(config: str) -> subprocess.CompletedProcess:
    """`parse_args` in a child process with 4 GiB of address space and a deadline (before the fix /dev/zero ran
    into a MemoryError and a FIFO hung)."""
    limit = 4 << 30
    return subprocess.run(
        [sys.executable, "-c", "import sys; from app.cli import parse_args; parse_args(sys.argv[1:])",
         "--video", "x.mp4", "--config", config],
        cwd=REPO, capture_output=True, text=True, timeout=60,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)),
    )  # fmt: skip


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo"])
def test_a_device_or_a_fifo_is_refused_at_once(tmp_path, kind: str) -> None:
    path = kind
    if kind == "fifo":
        path = str(tmp_path / "config.fifo")
        os.mkfifo(path)
    done = _parse_in_a_child(path)
    assert done.returncode == 2, done.stderr[-2000:]
    assert "not a regular file" in done.stderr and "Traceback" not in done.stderr


def test_a_good_file_still_works(tmp_path) -> None:
    path = tmp_path / "ok.toml"
    path.write_text('question = "what is here?"\nevery = 5\n')
    args = parse_args(["--video", "x.mp4", "--config", str(path)])
    assert args.question == "what is here?" and args.every == 5
