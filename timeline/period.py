"""A period of the timeline (wall seconds since the epoch, `since` included, `until` excluded), checked before any
query: one that ends before it starts, starts in the future, or reaches further back than the timeline keeps is
refused with what to ask instead."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import datetime

DAY_S = 86400.0
AGE_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": DAY_S}
AGE = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
TIME_FORMS = "an age (90s, 30m, 2h, 1d: that long ago), seconds since the epoch, or an ISO 8601 time (2026-12-02T18:00)"
MAX_TIME_CHARS = 40


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


def parse_time(text: str, now: float | None = None) -> float:
    """Wall seconds for `text`: an age (`2h` means two hours before `now`), seconds since the epoch (`1780000000`),
    or an ISO 8601 date or time (`2026-12-02`, `2026-12-02T18:00`, local time unless it names its zone).
    PeriodError naming the forms otherwise."""
    now = time.time() if now is None else now
    stripped = text.strip().lower()
    if len(stripped) > MAX_TIME_CHARS:
        raise PeriodError(f"a time is at most {MAX_TIME_CHARS} characters: expected {TIME_FORMS}")
    age = AGE.fullmatch(stripped)
    if age:
        return now - float(age.group(1)) * AGE_UNITS[age.group(2)]
    try:
        value = float(stripped)
    except ValueError:
        value = None
    if value is not None:
        if value != value or abs(value) == float("inf"):
            raise PeriodError(f"invalid time {text[:MAX_TIME_CHARS]!r}: expected {TIME_FORMS}")
        return value
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except (ValueError, OverflowError, OSError):
        raise PeriodError(f"invalid time {text[:MAX_TIME_CHARS]!r}: expected {TIME_FORMS}") from None
