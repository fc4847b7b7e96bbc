"""An output's reads of the timeline, on a thread of its own: never the model worker's, nor paho's network thread.

`TimelineReads` keeps one bounded queue of jobs (a job is a function of an open `TimelineReader`) and one thread
that opens the reader read-only at its first job and runs them in order. The writer may create the timeline after
the outputs start (a fleet's head does): a timeline not there before any reader could open it is only logged, and
tried again at the next job; a failure after that is reported once until a job succeeds again. When the
queue is full a job is refused (`submit` says so), never waited for. A `midnight` callback runs at each local
midnight; when that is due is a pure function of the wall clock (`next_midnight`), so tests give it their own.

The today sensors (`today_payload`) are exact: the summary of [local midnight, now) of one watch, from the rows the
timeline writer wrote. The writer runs on its own thread, so a job about an alert first waits (bounded) for its row.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from bus.reporting import ErrorCallback, call_reporter
from timeline import TimelineConfig, TimelineError, TimelineReader
from timeline.period import Period

logger = logging.getLogger(__name__)

Job = Callable[[TimelineReader], None]
Failed = Callable[[TimelineError], None]  # a job's answer when the timeline cannot be opened or read
ROW_SQL = "SELECT count(*) FROM moments m WHERE m.kind = 'alert' AND m.alert_id = ? AND m.state = ?"
RECHECK_S = 60.0


def local_midnight(now: float) -> float:
    """Wall seconds of the last local midnight at or before `now`."""
    moment = datetime.fromtimestamp(now)
    return moment.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()


def next_midnight(now: float) -> float:
    """Wall seconds of the first local midnight after `now` (a day of 23 or 25 hours at a DST change)."""
    day = datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
    return day.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()


def today_payload(reader: TimelineReader, stream: str, alert: str, now: float) -> dict[str, Any]:
    """{"count": alerts of (stream, alert) begun since local midnight, "on_s": seconds on since then, "since"}."""
    since = local_midnight(now)
    watches = reader.summary(Period(since, max(now, since + 0.001)), stream=stream, watch=alert).watches
    found = next((w for w in watches if w.stream == stream and w.watch == alert), None)
    count, on_s = (found.began, found.on_s) if found else (0, 0.0)
    return {"count": count, "on_s": round(on_s, 1), "since": since}


class TimelineReads:
    """Jobs that read the timeline, run on one thread of their own (see the module docstring).

    Args:
        name: for messages, e.g. "mqtt 127.0.0.1:1883".
        timeline: the running assistant's timeline (its location and `days`).
        on_error: told (once per outage) when the timeline cannot be opened or read.
        clock: wall seconds (tests pass their own).
        midnight: called on the thread at each local midnight of `clock`.
        queue_size: jobs kept waiting; `submit` refuses more.
        wait_for_row_s: how long `wait_for_alert` waits for the writer to write an alert's row.
        recheck_s: an idle thread looks at `clock` at least this often (a clock set forward, a DST change).
    """

    def __init__(
        self,
        name: str,
        timeline: TimelineConfig,
        on_error: ErrorCallback | None = None,
        clock: Callable[[], float] = time.time,
        midnight: Callable[[TimelineReader], None] | None = None,
        queue_size: int = 64,
        wait_for_row_s: float = 3.0,
        recheck_s: float = RECHECK_S,
    ) -> None:
        self.name = name
        self.timeline = timeline
        self.on_error = on_error
        self.clock = clock
        self.midnight = midnight
        self.wait_for_row_s = wait_for_row_s
        self.recheck_s = recheck_s
        self._jobs: queue.Queue[tuple[Job, Failed | None]] = queue.Queue(maxsize=queue_size)
        self._stop = threading.Event()
        self._reader: TimelineReader | None = None
        self._failing = False
        self._opened = False  # a reader was opened once: a timeline missing or unreadable since then is reported
        self._thread = threading.Thread(target=self._run, name=f"{name} timeline", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self, timeout: float) -> None:
        """Stops after the job under way (jobs still queued are left); joins the thread."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def submit(self, job: Job, failed: Failed | None = None) -> bool:
        """Queues `job`; False (nothing queued) when the queue is full or the thread stopped. `failed`: called
        instead when the timeline cannot be opened or read."""
        if self._stop.is_set():
            return False
        try:
            self._jobs.put_nowait((job, failed))
        except queue.Full:
            return False
        return True

    def wait_for_alert(self, reader: TimelineReader, alert_id: str, state: str) -> bool:
        """Whether the row of alert `alert_id`'s `state` (begin|end) is in the timeline, waiting for the writer up
        to `wait_for_row_s` seconds (on this thread)."""
        deadline = time.monotonic() + self.wait_for_row_s
        while True:
            if reader.db.query(ROW_SQL, [alert_id, state])[0][0]:
                return True
            if time.monotonic() >= deadline or self._stop.wait(0.05):
                return False

    def _run(self) -> None:
        due = next_midnight(self.clock())
        while not self._stop.is_set():
            now = self.clock()
            if now >= due:
                due = next_midnight(now)
                if self.midnight is not None:
                    self._do(self.midnight)
                continue
            try:
                job, failed = self._jobs.get(timeout=max(0.01, min(due - now, self.recheck_s)))
            except queue.Empty:
                continue
            self._do(job, failed)
        if self._reader is not None:
            self._reader.close()

    def _do(self, job: Job, failed: Failed | None = None) -> None:
        try:
            if self._reader is None:
                self._reader = TimelineReader(self.timeline.path, self.timeline.busy_timeout_s)
                self._opened = True
            job(self._reader)
            self._failing = False
        except TimelineError as err:
            if self._reader is not None:
                self._reader.close()
                self._reader = None  # opened again at the next job
            if failed is not None:
                failed(err)
            if not self._opened:
                logger.info("%s: the timeline is not there yet (%s); tried again at the next read", self.name, err)
            elif not self._failing:
                call_reporter(self.on_error, f"{self.name}: cannot read the timeline ({err})")
                self._failing = True
        except Exception as exc:  # a job's bug must not end the thread: reported by type, the next job goes on
            logger.exception("%s: a timeline job failed", self.name)
            call_reporter(self.on_error, f"{self.name}: a timeline job failed ({type(exc).__name__})")
