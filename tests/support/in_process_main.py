"""`python -m app ARGS` in the test's own process (`app.__main__.main`), for checks that only read its exit code and
what it wrote: no new interpreter per check (a subprocess stays where the process boundary is the point)."""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

import pytest

from app.__main__ import main
from cache.cpu import kernels as cpu_kernels
from tests.support.app_helpers import app_command


def run_main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """(exit code, stderr) of `python -m app ARGS` run here: an exit through argparse (SystemExit) and a returned
    code read the same. As `app_command`, a run that names no --timeline gets a fresh one in a temporary folder."""
    argv = app_command(*args)[3:]  # [python, -m, app, *ARGS]
    capsys.readouterr()  # only this run's output
    root = logging.getLogger()
    kept, level = root.handlers[:], root.level
    root.handlers.clear()  # so the run's logging.basicConfig binds its handler to this test's captured stderr
    try:
        code = main(argv)
    except SystemExit as exited:
        code = exited.code
    finally:
        root.handlers[:] = kept  # the run's handler goes with it (its stream is this test's capture)
        root.setLevel(level)
    return code, capsys.readouterr().err


def run_app_here(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`run_app` (tests/support/app_helpers.py) without a new interpreter: `python -m app ARGS` run by `main` in this
    process, its stdin a real pipe holding `stdin` (else /dev/null), `env` set in os.environ for the run only, and
    what it printed and logged collected from real files. For short runs whose checks read only the exit code, the
    output and the files the run wrote; where the process boundary is the point (signals, exit, kill) keep run_app.
    Saves the interpreter's start and torch's import, a few seconds a run on 2 cores."""
    argv = app_command(*args)[3:]
    saved_env = {key: os.environ.get(key) for key in env or {}}
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    root = logging.getLogger()
    kept, level = root.handlers[:], root.level
    with tempfile.TemporaryDirectory(prefix="in-process-app-") as folder:
        out_path, err_path = Path(folder) / "stdout", Path(folder) / "stderr"
        with open(out_path, "w") as out, open(err_path, "w") as err, _pipe_holding(stdin) as given:
            os.environ.update(env or {})
            kernels_were = cpu_kernels.kernels_enabled()
            if cpu_kernels.DISABLE_VARIABLE in (env or {}):  # read once per process: a run here says it itself
                cpu_kernels.use_cpu_kernels(env[cpu_kernels.DISABLE_VARIABLE] != "0")
            sys.stdin, sys.stdout, sys.stderr = given, out, err
            root.handlers.clear()  # so the run's logging.basicConfig binds its handler to this run's stderr
            try:
                code = main(argv)
            except SystemExit as exited:
                code = exited.code
            finally:
                sys.stdin, sys.stdout, sys.stderr = saved_streams
                cpu_kernels.use_cpu_kernels(kernels_were)
                root.handlers[:] = kept
                root.setLevel(level)
                for key, value in saved_env.items():
                    if value is None:
                        os.environ.pop(key, None)
                    else:
                        os.environ[key] = value
        return subprocess.CompletedProcess(argv, code, out_path.read_text(), err_path.read_text())


@contextlib.contextmanager
def _pipe_holding(text: str | None) -> Iterator[TextIO]:
    """A real pipe's reading end that holds `text` and then ends (select() works on it), or /dev/null."""
    if text is None:
        with open(os.devnull) as empty:
            yield empty
        return
    reading, writing = os.pipe()
    data = text.encode()
    if len(data) > 60_000:  # what a pipe holds without a reader
        os.close(reading)
        os.close(writing)
        raise ValueError("run_app_here: stdin longer than a pipe holds; use run_app")
    os.write(writing, data)
    os.close(writing)
    with os.fdopen(reading) as given:
        yield given
