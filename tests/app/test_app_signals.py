"""app.signals in a process of its own: handlers installed whatever was inherited; a second signal is final."""

import signal
import subprocess
import sys
import textwrap

import pytest

from tests.support.app_helpers import REPO

PRELUDE = """
import os, signal, sys, time
from app.signals import StopRequested, stop_on_signals
sys.stdout.reconfigure(line_buffering=True)  # os._exit does not flush
"""

STOP_THEN_FORCE = PRELUDE + textwrap.dedent(
    """
    with stop_on_signals():
        try:
            os.kill(os.getpid(), signal.{first})
            time.sleep(10)
            print("not stopped")
        except StopRequested as stop:
            print("stopped by", stop.signal_name)
        os.kill(os.getpid(), signal.SIGINT)  # a second signal ends the process at once
        time.sleep(10)
        print("still running")
    """
)

SIGNAL_WHILE_CLOSING = PRELUDE + textwrap.dedent(
    """
    with stop_on_signals() as signals:
        signals.closing()  # the run ended by itself and is shutting down
        os.kill(os.getpid(), signal.SIGTERM)  # only noted: the shutdown goes on
        time.sleep(0.2)
        print("closing went on")
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(10)
        print("still running")
    """
)


def run(script: str, ignore_sigint: bool = False) -> subprocess.CompletedProcess:
    def preexec() -> None:
        if ignore_sigint:  # what a background job started by a shell script inherits
            signal.signal(signal.SIGINT, signal.SIG_IGN)

    return subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60, preexec_fn=preexec
    )


@pytest.mark.parametrize("ignore_sigint", [False, True], ids=["sigint-default", "sigint-ignored-at-start"])
@pytest.mark.parametrize("first", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_first_signal_stops_the_run_and_a_second_one_exits_at_once(first, ignore_sigint):
    done = run(STOP_THEN_FORCE.format(first=first), ignore_sigint)
    assert done.stdout.splitlines() == [f"stopped by {first}"]
    assert done.returncode == 130
    assert "SIGINT again: exiting now" in done.stderr


def test_a_signal_during_shutdown_does_not_interrupt_it():
    done = run(SIGNAL_WHILE_CLOSING)
    assert done.stdout.splitlines() == ["closing went on"]
    assert done.returncode == 130 and "SIGTERM again: exiting now" in done.stderr
