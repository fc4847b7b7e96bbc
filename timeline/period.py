"""A period of the timeline (wall seconds since the epoch, `since` included, `until` excluded), checked before any
query: one that ends before it starts, starts in the future, or reaches further back than the timeline keeps is
refused with what to ask instead."""

from __future__ import annotations

import time
from dataclasses import dataclass

DAY_S = 86400.0


class PeriodError(ValueError):
    """A period that cannot be summed up; the message says why and what to ask instead."""


@dataclass(frozen=True)
class Period:
    since: float
    until: float

    @property
    def seconds(self) -> float:
        return self.until - self.since

    def to_dict(self) -> dict[str, float]:
        return {"since": self.since, "until": self.until}


def period(
    since: float | None = None,
    until: float | None = None,
    *,
    keep_days: float | None = None,
    now: float | None = None,
) -> Period:
    """The period from `since` to `until` (wall seconds; `until` defaults to now, `since` to a day before
    `until`). `keep_days`: how long the timeline keeps rows (its `--timeline-days`); a period reaching further
    back than that is refused, since its start is gone. Raises PeriodError."""
    now = time.time() if now is None else now
    until = now if until is None else float(until)
    since = until - DAY_S if since is None else float(since)
    if not (since == since and until == until) or abs(since) == float("inf") or abs(until) == float("inf"):
        raise PeriodError("the period's start and end must be finite times (seconds since the epoch)")
    if since > now:
        raise PeriodError(f"the period starts in the future ({since - now:.0f} s from now): ask about the past")
    if until <= since:
        raise PeriodError(
            f"the period ends before it starts (until {until:.0f} <= since {since:.0f}): give since < until"
        )
    if keep_days is not None and since < now - keep_days * DAY_S - 1.0:
        raise PeriodError(
            f"the period starts {(now - since) / DAY_S:.1f} days ago, but the timeline keeps {keep_days:g} days "
            "(--timeline-days): ask about a shorter period"
        )
    return Period(since, min(until, now))
