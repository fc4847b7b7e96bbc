"""/api/v1/streams: list the streams with their state, add one (the page's source policy applies), remove one."""

from __future__ import annotations

from fastapi import APIRouter, Depends, HTTPException, Response

from api.context import ApiContext, refusal
from api.models import BODY_UNREADABLE, Admitted, StreamAdd, StreamView, refusals
from bus.desk import DeskStream
from bus.redact import redact_source
from capture import SourceError

REFUSALS = refusals(401, 403, 404, 409, 422, 429, 507)


def view(stream: DeskStream) -> StreamView:
    """A stream as the API sends it: its source redacted (never a password), times rounded to the ms."""
    return StreamView(
        name=stream.name,
        state=stream.state,
        source=redact_source(stream.source) if stream.source is not None else None,
        stream_time=round(stream.stream_time, 3),
        clips=stream.clips,
        answers=stream.answers,
        lag_s=round(stream.lag_s, 3),
        watches=list(stream.watches),
        default=stream.first,
        host=stream.host,
    )


def router(ctx: ApiContext) -> APIRouter:
    api = APIRouter(tags=["streams"])
    manager = Depends(ctx.need("manage"))
    reader = Depends(ctx.need("read"))

    @api.get("/api/v1/streams", response_model=list[StreamView], responses=REFUSALS, summary="The streams")
    def streams(token=reader):
        return [view(s) for s in ctx.desk.desk_streams().values()]

    @api.get("/api/v1/streams/{name}", response_model=StreamView, responses=REFUSALS, summary="One stream")
    def stream(name: str, token=reader):
        ctx.stream_named(name)
        return view(ctx.desk.desk_streams()[name])

    @api.post(
        "/api/v1/streams",
        response_model=Admitted,
        status_code=201,
        responses={**REFUSALS, **BODY_UNREADABLE},
        summary="Add a stream (rtsp/http(s) URL or a camera configured at start)",
    )
    def add(body: StreamAdd, token=manager):
        """As the page's "Add stream": the source policy (capture.policy) decides what may be opened; 403 when
        it refuses, 409 for a name in use, 507 when one more stream does not fit in memory (the arithmetic)."""
        source: str | int = body.source.strip()
        if isinstance(source, str) and source.isdigit():
            source = int(source)
        try:
            if body.name in ctx.desk.desk_streams():
                raise HTTPException(409, f"a stream named {body.name!r} exists already")
            admission = ctx.desk.add_stream(body.name, ctx.options.config(source))
        except (SourceError, ValueError) as err:
            raise refusal(err) from None
        return Admitted(body.name, admission)

    @api.delete("/api/v1/streams/{name}", status_code=204, responses=REFUSALS, summary="Remove a stream")
    def remove(name: str, token=manager):
        ctx.stream_named(name)
        try:
            ctx.desk.remove_stream(name)
        except ValueError as err:
            raise HTTPException(409, str(err)) from None
        return Response(status_code=204)

    return api
