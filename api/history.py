"""/api/v1/history: the timeline's search (answers, alerts, stream events) and its thumbnails."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Query, Response

from api.context import ApiContext
from api.models import refusals
from timeline.reader import Moment

REFUSALS = refusals(401, 403, 404, 422, 503)
MAX_LIMIT = 200
MAX_ROW_ID = 2**63 - 1  # the timeline's ids are 64-bit (SQLite INTEGER, PostgreSQL bigint), from 1


def router(ctx: ApiContext) -> APIRouter:
    api = APIRouter(tags=["history"])
    reader = Depends(ctx.need("read"))

    def timeline():
        if ctx.history is None:
            raise HTTPException(503, 'the timeline is off (--timeline ""): no history to search')
        return ctx.history

    @api.get("/api/v1/history", response_model=list[Moment], responses=REFUSALS, summary="Search the timeline")
    def search(
        text: str | None = Query(None, max_length=500, description="words to find (full-text)"),
        since_s: float | None = Query(None, gt=0, description="only the last this many seconds"),
        stream: str | None = Query(None, max_length=64, description="only this stream's (404: a stream never seen)"),
        limit: int = Query(20, ge=1, le=MAX_LIMIT),
        token=reader,
    ):
        from ui.history import HistoryUnavailable

        try:
            moments = timeline().search(text or None, since_s, stream, limit)
            if not moments and stream is not None and stream not in ctx.desk.desk_streams():
                # a stream removed (or lost) keeps its history: 404 only for one the timeline never saw
                if not timeline().search(None, None, stream, 1):
                    known = ", ".join(ctx.desk.desk_streams())
                    raise HTTPException(404, f"no stream named {stream!r}, now or in the timeline; streams: {known}")
        except HistoryUnavailable as err:
            raise HTTPException(503, str(err)) from None
        return moments  # the timeline's own rows; each one's thumbnail at /api/v1/history/{id}/thumbnail

    @api.get(
        "/api/v1/history/{row_id}/thumbnail",
        responses={**REFUSALS, 200: {"content": {"image/jpeg": {}}}},
        response_class=Response,
        summary="A moment's thumbnail (JPEG)",
    )
    def thumbnail(row_id: int, token=reader):
        from ui.history import HistoryUnavailable

        if not 1 <= row_id <= MAX_ROW_ID:  # (the message never repeats the id: it may have 5,000 digits)
            raise HTTPException(404, f"no such moment: the timeline's ids are 1 to {MAX_ROW_ID}")
        try:
            jpeg = timeline().thumbnail(row_id)
        except HistoryUnavailable as err:
            raise HTTPException(503, str(err)) from None
        if jpeg is None:
            raise HTTPException(404, f"no thumbnail for moment {row_id}")
        return Response(jpeg, media_type="image/jpeg")

    return api
