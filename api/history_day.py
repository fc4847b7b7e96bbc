"""/api/v1/history/day.png: the day as a picture (timeline.day_picture): a strip per stream and per watch across
a period, from the timeline's rows. The same period and refusals as /api/v1/history/summary (api.history_period)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Response

from api.context import ApiContext
from api.history_period import REFUSALS, _known_or_404, _period, _read
from timeline.day_picture import DEFAULT_WIDTH, MAX_WIDTH, MIN_WIDTH, day_png
from timeline.period import MAX_TIME_CHARS, TIME_FORMS


def router(ctx: ApiContext) -> APIRouter:
    api = APIRouter(tags=["history"])
    reader = Depends(ctx.need("read"))

    @api.get(
        "/api/v1/history/day.png",
        responses={**REFUSALS, 200: {"content": {"image/png": {}}, "description": "the picture (PNG)"}},
        response_class=Response,
        summary="The day as a picture (PNG)",
    )
    def day_picture(
        since: str | None = Query(
            None, max_length=MAX_TIME_CHARS, description=f"the period's start: {TIME_FORMS} (default: a day ago)"
        ),
        until: str | None = Query(
            None, max_length=MAX_TIME_CHARS, description=f"the period's end: {TIME_FORMS} (default: now)"
        ),
        stream: str | None = Query(None, max_length=64, description="only this stream's strips (404: one never seen)"),
        width: int = Query(DEFAULT_WIDTH, ge=MIN_WIDTH, le=MAX_WIDTH, description="pixels"),
        token=reader,
    ):
        """A strip per stream (its standing answers, each change of answer marked, and its gaps) and per watch
        (when it was on), time ticks in the assistant's local time, a legend. At most 500 segments a strip (the
        shortest neighbours merge; the strip's label says how many) and 40 strips."""
        span = _period(ctx, since, until)
        result = _read(ctx, lambda history: history.day(span, stream=stream))
        if not result.strips:
            _known_or_404(ctx, stream, None)
        return Response(day_png(result, width), media_type="image/png", headers={"Cache-Control": "no-store"})

    return api
