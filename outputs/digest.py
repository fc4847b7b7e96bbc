"""The daily digest (`--digest-at HH:MM`, local time): every day at that time, the timeline's recap since the
previous digest (the first one: the last day, never further back than the timeline keeps) becomes a `Digest` event
(`outputs.recaps`) handed to the outputs: ntfy sends its `recap_text`, webhooks POST the recap's JSON, MQTT
publishes both on `<prefix>/digest`. When it is due is a pure function of the wall clock (`next_digest`), and
`DigestSink.tick(now)` does what is due at `now`, so tests drive it with their own clock. With the timeline off it
says once what to turn on and sends nothing.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from bus import Event
from bus.reporting import call_reporter
from outputs.recaps import TIMELINE_OFF, Digest
from outputs.registry import OutputKind, SinkContext, register
from timeline import TimelineConfig, TimelineError, TimelineReader
from timeline.period import DAY_S, Period, PeriodError, period
from timeline.recap import recap_text

logger = logging.getLogger(__name__)

AT = re.compile(r"([01]?\d|2[0-3]):([0-5]\d)")


@dataclass(frozen=True)
class DigestConfig:
    """at: the local time ("HH:MM", 24 h) of the daily digest; max_lines: the recap's lines at most (its newest)."""

    at: str = field(
        metadata={
            "flag": "--digest-at",
            "metavar": "HH:MM",
            "help": "every day at this local time, the timeline's recap since the previous digest (the first: "
            "the last day) through ntfy, webhooks and MQTT (<prefix>/digest); needs the timeline",
        }
    )
    max_lines: int = 50

    def __post_init__(self) -> None:
        if not isinstance(self.at, str) or not AT.fullmatch(self.at.strip()):
            raise ValueError(f"--digest-at must be a local time HH:MM (00:00 to 23:59), got {str(self.at)[:20]!r}")
        if not 1 <= self.max_lines <= 200:
            raise ValueError(f"digest max_lines must be 1 to 200, got {self.max_lines}")

    @property
    def hour_minute(self) -> tuple[int, int]:
        hour, minute = self.at.strip().split(":")
        return int(hour), int(minute)


def next_digest(now: float, at: tuple[int, int]) -> float:
    """Wall seconds of the first local `at` (hour, minute) after `now`."""
    today = datetime.fromtimestamp(now).replace(hour=at[0], minute=at[1], second=0, microsecond=0)
    due = today.timestamp()
    return due if due > now else (today + timedelta(days=1)).timestamp()


def digest_period(last: float | None, now: float, keep_days: float) -> Period:
    """Since the previous digest (`last`; None: a day ago), never further back than the timeline keeps, to now."""
    since = now - DAY_S if last is None else last
    return period(max(since, now - keep_days * DAY_S), now, keep_days=keep_days, now=now)


class DigestSink:
    """The scheduled digest as an output: its thread reads the recap when due and hands a `Digest` to `deliver`
    (the publisher, which feeds the outputs that want it). Nothing of its own is sent anywhere.

    Args:
        config: when, and how long a recap.
        timeline: the running assistant's timeline (None: off; said once at start, nothing is sent).
        deliver: where a digest goes (the publisher's queue; it never blocks).
        on_error: told when the timeline cannot be read.
        clock: wall seconds (tests drive `tick` with their own instead of starting the thread).
    """

    def __init__(
        self,
        config: DigestConfig,
        timeline: TimelineConfig | None,
        deliver: Callable[[Event], None] | None,
        on_error: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.timeline = timeline
        self.deliver = deliver
        self.on_error = on_error
        self.clock = clock
        self.name = f"digest at {config.at}"
        self.dropped = 0
        self.last: float | None = None  # the end of the previous digest's period
        self.due = next_digest(clock(), config.hour_minute)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)

    def start(self) -> None:
        if self.timeline is None:
            call_reporter(self.on_error, f"{self.name}: {TIMELINE_OFF}; no digest is sent")
            return
        self._thread.start()

    def handle(self, event: Event) -> None:
        """Digests pass through the publisher to the other outputs; this one has nothing to do with them."""

    def close(self, timeout: float) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def tick(self, now: float) -> Digest | None:
        """Sends the digest when it is due at `now` (and schedules the next); returns what it sent."""
        if now < self.due or self.timeline is None:
            return None
        self.due = next_digest(now, self.config.hour_minute)
        try:
            span = digest_period(self.last, now, self.timeline.days)
            with TimelineReader(self.timeline.path, self.timeline.busy_timeout_s) as reader:
                recap = reader.recap(span, max_lines=self.config.max_lines)
        except (TimelineError, PeriodError) as err:
            call_reporter(self.on_error, f"{self.name}: no digest ({err})")
            return None
        self.last = span.until
        digest = Digest(recap=recap, text=recap_text(recap), t_wall=now)
        if self.deliver is not None:
            self.deliver(digest)
        return digest

    def _run(self) -> None:
        while not self._stop.wait(max(0.05, min(self.due - self.clock(), 60.0))):
            self.tick(self.clock())


def _sink(config: DigestConfig, context: SinkContext) -> DigestSink:
    return DigestSink(config, context.timeline, context.deliver, on_error=context.on_error)


register(OutputKind("digest", DigestConfig, _sink, wants=(Digest,), switch="at"))  # head only: one digest a day
