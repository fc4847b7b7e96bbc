"""/api/v1/history/summary and /api/v1/history/recap: what happened in a period ("how many times, how long, what
happened since"), from the timeline's rows (timeline.summary, timeline.recap)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from fastapi import APIRouter, Depends, HTTPException, Query

from api.context import ApiContext
from api.models import refusals
from timeline.period import MAX_TIME_CHARS, TIME_FORMS, Period, PeriodError, parse_time, period
from timeline.recap import DEFAULT_LINES, DEFAULT_THUMBNAILS, MAX_LINES, MAX_THUMBNAILS, Recap
from timeline.summary import Summary

REFUSALS = refusals(401, 403, 404, 422, 503)
MAX_NAMES = 50  # names listed in a 404 (a timeline of many streams keeps its message short)
TIMELINE_OFF = (
    'the timeline is off (--timeline ""): start the assistant with --timeline PATH (an SQLite file; the default is '
    "one in its data folder) or --timeline postgresql://... to keep the history a period is read from"
)


def router(ctx: ApiContext) -> APIRouter:
    api = APIRouter(tags=["history"])
    reader = Depends(ctx.need("read"))
    since_query = Query(
        None, max_length=MAX_TIME_CHARS, description=f"the period's start: {TIME_FORMS} (default: a day before until)"
    )
    until_query = Query(None, max_length=MAX_TIME_CHARS, description=f"the period's end: {TIME_FORMS} (default: now)")
    stream_query = Query(None, max_length=64, description="only this stream's (404: one never seen nor running)")
    watch_query = Query(None, max_length=64, description="only this watch's alerts (404: one never seen nor running)")

    @api.get(
        "/api/v1/history/summary",
        response_model=Summary,
        responses=REFUSALS,
        summary="How many times and how long, in a period",
    )
    def summary(
        since: str | None = since_query,
        until: str | None = until_query,
        stream: str | None = stream_query,
        watch: str | None = watch_query,
        bucket: Literal["hour", "day"] | None = Query(None, description="also per local hour or day"),
        token=reader,
    ):
        """Per watch: how many times it began, how long it was on in all and at most, its first and last begin,
        whether it is on at the period's end; per stream: its answers, alerts and gaps (time down)."""
        span = _period(ctx, since, until)
        result = _read(ctx, lambda history: history.summary(span, stream=stream, watch=watch, bucket=bucket))
        if not result.streams and not result.watches:
            _known_or_404(ctx, stream, watch)
        return result

    @api.get(
        "/api/v1/history/recap",
        response_model=Recap,
        responses=REFUSALS,
        summary="What happened in a period, line by line",
    )
    def recap(
        since: str | None = since_query,
        until: str | None = until_query,
        stream: str | None = stream_query,
        watch: str | None = watch_query,
        lines: int = Query(DEFAULT_LINES, ge=1, le=MAX_LINES, description="at most this many lines (the newest)"),
        thumbnails: int = Query(
            DEFAULT_THUMBNAILS, ge=0, le=MAX_THUMBNAILS, description="at most this many lines cite a thumbnail"
        ),
        token=reader,
    ):
        """Alerts, runs of equal standing answers, a person's answers and gaps, each citing its moments' ids
        (their thumbnails at /api/v1/history/{id}/thumbnail); `message` says what the period held, or nothing."""
        span = _period(ctx, since, until)
        result = _read(
            ctx,
            lambda history: history.recap(span, stream=stream, watch=watch, max_lines=lines, max_thumbnails=thumbnails),
        )
        if not result.lines:
            _known_or_404(ctx, stream, watch)
        return result

    return api


def _timeline(ctx: ApiContext):
    if ctx.history is None:
        raise HTTPException(503, TIMELINE_OFF)
    return ctx.history


def _read(ctx: ApiContext, read: Callable):
    from ui.history import HistoryUnavailable

    try:
        return read(_timeline(ctx))
    except HistoryUnavailable as err:
        raise HTTPException(503, str(err)) from None
    except PeriodError as err:  # a period too long for the buckets asked
        raise HTTPException(422, str(err)) from None


def _period(ctx: ApiContext, since: str | None, until: str | None) -> Period:
    """The asked period, no further back than the timeline keeps (--timeline-days); 422 with why otherwise."""
    history = _timeline(ctx)
    try:
        start = None if since is None else parse_time(since)
        end = None if until is None else parse_time(until)
        return period(start, end, keep_days=history.keep_days)
    except PeriodError as err:
        raise HTTPException(422, str(err)) from None


def _known_or_404(ctx: ApiContext, stream: str | None, watch: str | None) -> None:
    """404 for a stream or watch neither the timeline holds a row of nor the assistant runs (an empty period of
    a known one is an answer: nothing happened)."""
    if stream is None and watch is None:
        return
    streams, watches = _read(ctx, lambda history: history.names())
    known_streams = sorted(set(streams) | set(ctx.desk.desk_streams()))
    if stream is not None and stream not in known_streams:
        raise HTTPException(
            404, f"no stream named {stream!r}, now or in the timeline; streams: {_listed(known_streams)}"
        )
    running = set(ctx.watches.configured) | {runtime.spec.name for runtime in ctx.watches.list()}
    known_watches = sorted({name for seen_on, name in watches if stream in (None, seen_on)} | running)
    if watch is not None and watch not in known_watches:
        where = f"of stream {stream!r}, " if stream is not None else ""
        raise HTTPException(
            404, f"no watch named {watch!r} {where}now or in the timeline; watches: {_listed(known_watches)}"
        )


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:MAX_NAMES]) or "none"
    return shown + (f" (and {len(names) - MAX_NAMES} more)" if len(names) > MAX_NAMES else "")
