"""Workers that never die silently: an unexpected exception in an output's thread becomes one report and a
restart after a backoff, at most `max_restarts` times in a row (a run of `healthy_s` seconds resets the count).

The report names the worker and the exception's type only: an exception's text may hold anything (a URL with
a token, a payload). The traceback goes to the debug log.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from bus.reporting import ErrorCallback, call_reporter

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RestartPolicy:
    """How a crashed worker is restarted.

    Args:
        max_restarts: restarts in a row before giving up (the worker then stays stopped, reported).
        backoff_s: wait before the first restart, seconds; doubles for each further one up to `max_backoff_s`.
        healthy_s: a run at least this long (seconds) before a crash resets the count of crashes in a row.
    """

    max_restarts: int = 5
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    healthy_s: float = 60.0

    def __post_init__(self) -> None:
        if self.max_restarts < 0 or self.backoff_s < 0 or self.max_backoff_s < 0 or self.healthy_s < 0:
            raise ValueError("RestartPolicy: max_restarts, backoff_s, max_backoff_s and healthy_s must be >= 0")

    def delay(self, crashes: int) -> float | None:
        """Seconds to wait before restarting after `crashes` crashes in a row (1 for the first), or None to
        give up."""
        if crashes > self.max_restarts:
            return None
        return min(self.backoff_s * 2 ** (crashes - 1), self.max_backoff_s)


def run_supervised(
    name: str,
    work: Callable[[], None],
    on_error: ErrorCallback | None,
    stop: threading.Event,
    policy: RestartPolicy | None = None,
) -> None:
    """Calls `work()` until it returns; each exception is reported once and `work` is called again after the
    policy's backoff (unless `stop` is set meanwhile). Runs in the calling thread."""
    policy = policy or RestartPolicy()
    crashes = 0
    while True:
        started = time.monotonic()
        try:
            work()
            return
        except Exception as exc:
            logger.debug("%s: worker crashed", name, exc_info=True)
            crashes = 1 if time.monotonic() - started >= policy.healthy_s else crashes + 1
            delay = policy.delay(crashes)
            what = type(exc).__name__
            if delay is None:
                call_reporter(on_error, f"{name}: worker crashed ({what}) {crashes} times in a row; stopped")
                return
            call_reporter(
                on_error,
                f"{name}: worker crashed ({what}); restart {crashes} of at most {policy.max_restarts} in {delay:g} s",
            )
            if stop.wait(delay):
                return
