"""When to reconnect to a network stream or camera that dropped: a pure function of failures and time.

The capture thread asks ``policy.decide(failures, down_for_s)`` after every drop and after every failed
reopen, then waits ``delay_s`` (on the stop event, so a stop interrupts the wait) before the next attempt.
Nothing here sleeps or reads a clock, so the schedule is tested without threads.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReconnectDecision:
    """What to do next after a drop.

    Attributes:
        give_up: stop trying; the stream ends with an error event.
        delay_s: seconds to wait before the next attempt (0 when giving up).
        reason: a short human-readable explanation (used in events and logs).
    """

    give_up: bool
    delay_s: float
    reason: str


@dataclass(frozen=True)
class ReconnectPolicy:
    """Exponential backoff for reopening a dropped stream.

    The n-th consecutive failed attempt (n = 0 for the first try right after the drop) waits
    ``min(max_delay_s, initial_delay_s * multiplier**n)`` seconds before the next one.

    Attributes:
        enabled: reconnect at all; when False a drop ends the stream.
        initial_delay_s: wait before the first reopen after a drop, seconds.
        max_delay_s: the longest wait between two attempts, seconds.
        multiplier: growth factor of the wait per failed attempt (>= 1).
        max_attempts: give up after this many consecutive failed reopens; None = never.
        give_up_after_s: give up when the stream has been down this long, seconds; None = never.
    """

    enabled: bool = True
    initial_delay_s: float = 0.5
    max_delay_s: float = 10.0
    multiplier: float = 2.0
    max_attempts: int | None = None
    give_up_after_s: float | None = 300.0

    def __post_init__(self) -> None:
        if self.initial_delay_s < 0:
            raise ValueError(f"initial_delay_s must be >= 0 seconds, got {self.initial_delay_s}")
        if self.max_delay_s < self.initial_delay_s:
            raise ValueError(f"max_delay_s ({self.max_delay_s}) must be >= initial_delay_s ({self.initial_delay_s})")
        if self.multiplier < 1.0:
            raise ValueError(f"multiplier must be >= 1.0, got {self.multiplier}")
        if self.max_attempts is not None and self.max_attempts < 1:
            raise ValueError(f"max_attempts must be None (retry forever) or >= 1, got {self.max_attempts}")
        if self.give_up_after_s is not None and self.give_up_after_s <= 0:
            raise ValueError(f"give_up_after_s must be None (never) or > 0, got {self.give_up_after_s}")

    def delay_for(self, failures: int) -> float:
        """Seconds to wait before the attempt that follows ``failures`` consecutive failed attempts."""
        if failures < 0:
            raise ValueError(f"failures must be >= 0, got {failures}")
        # Cap the exponent so huge failure counts cannot overflow a float.
        return min(self.max_delay_s, self.initial_delay_s * self.multiplier ** min(failures, 64))

    def decide(self, failures: int, down_for_s: float) -> ReconnectDecision:
        """Decide the next step.

        Args:
            failures: consecutive failed reopen attempts since the drop (0 right after the drop).
            down_for_s: seconds since the stream dropped.
        """
        if not self.enabled:
            return ReconnectDecision(True, 0.0, "reconnection is disabled")
        if self.max_attempts is not None and failures >= self.max_attempts:
            return ReconnectDecision(True, 0.0, f"gave up after {failures} failed reconnection attempts")
        delay = self.delay_for(failures)
        if self.give_up_after_s is not None and down_for_s + delay > self.give_up_after_s:
            return ReconnectDecision(
                True, 0.0, f"gave up: stream down for {down_for_s:.1f} s (limit {self.give_up_after_s:g} s)"
            )
        return ReconnectDecision(False, delay, f"attempt {failures + 1} in {delay:.2f} s")
