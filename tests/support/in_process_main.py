"""`python -m app ARGS` in the test's own process (`app.__main__.main`), for checks that only read its exit code and
what it wrote: no new interpreter per check (a subprocess stays where the process boundary is the point)."""

from __future__ import annotations

import logging

import pytest

from app.__main__ import main
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
