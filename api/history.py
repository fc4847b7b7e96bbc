"""/api/v1/history: the timeline's search (answers, alerts, stream events) and its thumbnails."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Query, Response

from api.context import ApiContext
from api.models import Problem
from timeline.reader import Moment

REFUSALS = {code: {"model": Problem} for code in (401, 403, 404, 422, 503)}
MAX_LIMIT = 200


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
        stream: str | None = Query(None, max_length=64),
        limit: int = Query(20, ge=1, le=MAX_LIMIT),
        token=reader,
    ):
        from ui.history import HistoryUnavailable

        try:
            moments = timeline().search(text or None, since_s, stream, limit)
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

        try:
            jpeg = timeline().thumbnail(row_id)
        except HistoryUnavailable as err:
            raise HTTPException(503, str(err)) from None
        if jpeg is None:
            raise HTTPException(404, f"no thumbnail for moment {row_id}")
        return Response(jpeg, media_type="image/jpeg")

    return api
