"""`--config FILE` is read bounded (issue 39): deep nesting, bytes that are not UTF-8, `/dev/zero`, a FIFO and a
huge file each end in one clear message and exit code 2, never a traceback, a MemoryError or a hang."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import threading

import pytest

from app.cli import parse_args
from tests.support.app_helpers import REPO
from tests.support.in_process_main import run_main


def _refused(path, capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        parse_args(["--video", "x.mp4", "--config", str(path)])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


# The dotted table header is 5,000 keys deep, not 100,000: tomllib parses a dotted key in time quadratic in its
# length (15 s at 100,000 keys), and 5,000 is still far past both MAX_DEPTH and Python's recursion limit.
@pytest.mark.parametrize("nesting", ["a = " + "[" * 100_000, "a = " + "{b=" * 100_000, "[" + "a." * 5_000 + "b]"])
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


def test_a_device_is_refused_at_once() -> None:
    """In a child: its address-space limit is the point (reading /dev/zero whole must end in this message, not take
    the test machine's memory)."""
    done = _parse_in_a_child("/dev/zero")
    assert done.returncode == 2, done.stderr[-2000:]
    assert "not a regular file" in done.stderr and "Traceback" not in done.stderr


def test_a_fifo_is_refused_at_once(tmp_path, capsys) -> None:
    """In this process, on a thread with a deadline: opening a FIFO that no one writes must not hang."""
    path = tmp_path / "config.fifo"
    os.mkfifo(path)
    exits: list[SystemExit] = []

    def parse() -> None:
        try:
            parse_args(["--video", "x.mp4", "--config", str(path)])
        except SystemExit as exit_:
            exits.append(exit_)

    reader = threading.Thread(target=parse, daemon=True)
    reader.start()
    reader.join(60)
    assert not reader.is_alive(), "reading the FIFO hung"
    assert [e.code for e in exits] == [2]
    err = capsys.readouterr().err
    assert "not a regular file" in err and "Traceback" not in err


def test_a_good_file_still_works(tmp_path) -> None:
    path = tmp_path / "ok.toml"
    path.write_text('question = "what is here?"\nevery = 5\n')
    args = parse_args(["--video", "x.mp4", "--config", str(path)])
    assert args.question == "what is here?" and args.every == 5


@pytest.mark.parametrize("flag", ["--config", "--api-tokens-file"])
def test_a_folder_is_refused_with_the_reason_not_a_traceback(tmp_path, capsys, flag) -> None:
    """`--config DIR` and `--api-tokens-file DIR` once ended in IsADirectoryError's traceback (os.fdopen)."""
    folder = tmp_path / "a-folder"
    folder.mkdir(mode=0o700)
    code, err = run_main(capsys, "--api", "--model", "tiny", flag, str(folder))  # refused before the model loads
    assert code == 2 and "not a regular file" in err and "folder" in err and "Traceback" not in err
