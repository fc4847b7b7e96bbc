"""What every front door (the page, the headless API, the fleet's head) hands its routes: the timeline to search
and the capture options for sources picked at run time. Nothing here loads Gradio: the headless API starts
without it (about 3 s less)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from app.config import AppConfig
from capture.options import CaptureOptions
from timeline import Moment, PostgresTarget, TimelineError, TimelineReader
from timeline.config import Location
from timeline.day import Day
from timeline.period import Period, period
from timeline.recap import Recap
from timeline.summary import Summary
from ui.history import HistoryUnavailable


class TimelineHistory:
    """The History tab's `HistorySource`: each call opens the timeline (a file or a `PostgresTarget`) read-only
    (it never blocks the writer) on the calling thread (a Gradio handler's), and closes it. `keep_days`: how long
    the running assistant keeps rows (--timeline-days; None: not known), the furthest back a period may reach."""

    def __init__(self, path: Location, keep_days: float | None = None) -> None:
        self.path = path if isinstance(path, PostgresTarget) else Path(path)
        self.keep_days = keep_days

    def search(self, text: str | None, since_s: float | None, stream: str | None, limit: int) -> Sequence[Moment]:
        try:
            with TimelineReader(self.path) as reader:
                return reader.search(text, since_s=since_s, stream=stream, limit=limit)
        except TimelineError as err:
            raise HistoryUnavailable(str(err)) from err

    def summary(self, span: Period, **options) -> Summary:
        """Counts and durations of `span` (timeline.summary); `options`: stream, watch, bucket."""
        return self._read(lambda reader: reader.summary(span, **options))

    def recap(self, span: Period, **options) -> Recap:
        """The recap of `span` (timeline.recap); `options`: stream, watch, max_lines, max_thumbnails."""
        return self._read(lambda reader: reader.recap(span, **options))

    def day(self, span: Period, **options) -> Day:
        """The strips of `span` per stream and watch (timeline.day); `options`: stream, max_segments."""
        return self._read(lambda reader: reader.day(span, **options))

    def day_back(self, seconds: float, stream: str | None = None) -> Day:
        """The page's Day view: the strips of the last `seconds`, no further back than the timeline keeps
        (PeriodError, a ValueError, saying why otherwise)."""
        return self.day(period(time.time() - seconds, keep_days=self.keep_days), stream=stream)

    def recap_back(self, seconds: float, stream: str | None = None) -> Recap:
        """The page's Recap view: the recap of the last `seconds` (timeline.recap's default lines and thumbnails),
        no further back than the timeline keeps (PeriodError, a ValueError, saying why otherwise)."""
        return self.recap(period(time.time() - seconds, keep_days=self.keep_days), stream=stream)

    def summary_back(self, seconds: float, stream: str | None = None) -> Summary:
        """The Recap view's counts: the summary of the last `seconds` (as `recap_back`)."""
        return self.summary(period(time.time() - seconds, keep_days=self.keep_days), stream=stream)

    def names(self) -> tuple[list[str], list[tuple[str, str]]]:
        """Every stream and (stream, watch) the timeline holds a row of."""
        return self._read(lambda reader: reader.names())

    def _read(self, read):
        try:
            with TimelineReader(self.path) as reader:
                return read(reader)
        except TimelineError as err:
            raise HistoryUnavailable(str(err)) from err

    def thumbnail(self, row_id: int) -> bytes | None:
        return self.thumbnails([row_id]).get(row_id)

    def thumbnails(self, row_ids: Sequence[int]) -> Mapping[int, bytes]:
        """The JPEG thumbnails of those of `row_ids` that have one, read through one connection."""
        try:
            with TimelineReader(self.path) as reader:
                jpegs = {row_id: reader.thumbnail(row_id) for row_id in row_ids}
        except TimelineError as err:
            raise HistoryUnavailable(str(err)) from err
        return {row_id: jpeg for row_id, jpeg in jpegs.items() if jpeg is not None}


def timeline_history(config: AppConfig) -> TimelineHistory | None:
    """The timeline to search from the page; None when it is off (`--timeline ""`)."""
    timeline = getattr(config, "timeline", None)
    return None if timeline is None else TimelineHistory(timeline.path, keep_days=timeline.days)


def capture_options(
    config: AppConfig, max_size: tuple[int, int] | None, upload_dirs: Sequence[Path] = ()
) -> CaptureOptions:
    """--fps, --clip-seconds, --realtime, --loop for sources picked at run time, and which may be picked
    (capture.policy: rtsp/http(s) URLs, cameras configured at start, files inside `upload_dirs`: none without the
    page)."""
    policy = config.source_policy(upload_dirs=tuple(upload_dirs))
    return CaptureOptions(max_size=max_size, policy=policy, **config.capture_settings)
