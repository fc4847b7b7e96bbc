"""Ctrl-C, SIGTERM (`systemctl stop`, `docker stop`) and SIGHUP end a run the same way: the main thread gets
`StopRequested`, the caller closes capture and the log, and the process exits 0. A second signal while
stopping exits at once.

The handlers are installed whatever disposition the process inherited: a job started in the background
by a shell script inherits SIGINT as *ignored*, and Python then installs no KeyboardInterrupt handler.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
FORCED_EXIT_CODE = 130


class StopRequested(Exception):
    """A stop signal arrived (raised in the main thread)."""

    def __init__(self, signum: int) -> None:
        self.signal_name = signal.Signals(signum).name
        super().__init__(f"stopped by {self.signal_name}")


class SignalStop:
    """The handler's state: the first signal raises StopRequested (unless the run is already closing, when
    it is only noted); any further one exits the process at once."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.is_closing = False

    def closing(self) -> None:
        """From now on the run is shutting down: a first signal no longer interrupts the shutdown."""
        self.is_closing = True

    def handle(self, signum: int, frame) -> None:
        self.received.append(signum)
        if len(self.received) > 1:
            sys.stderr.write(f"\n{signal.Signals(signum).name} again: exiting now\n")
            sys.stderr.flush()
            os._exit(FORCED_EXIT_CODE)
        if not self.is_closing:
            raise StopRequested(signum)


@contextmanager
def stop_on_signals() -> Iterator[SignalStop]:
    """Installs the stop handlers while active (main thread only; elsewhere signals are left alone)."""
    state = SignalStop()
    if threading.current_thread() is not threading.main_thread():
        yield state
        return
    previous = {sig: signal.signal(sig, state.handle) for sig in STOP_SIGNALS}
    try:
        yield state
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_stoppable(run: Callable[[SignalStop], int], before: str) -> int:
    """Runs `run(signals)` with Ctrl-C and SIGTERM turned into `StopRequested` (see `stop_on_signals`); a stop that
    `run` does not handle itself (it came `before` its work started) is said on stderr and ends with 0."""
    with stop_on_signals() as signals:
        try:
            return run(signals)
        except StopRequested as stop:
            print(f"\n{stop.signal_name}: stopped before {before}", file=sys.stderr, flush=True)
            return 0
