"""GET /api/v1/events: the live feed of event records (Server-Sent Events; `id` numbered, `event` the record's
type), filtered by type and stream, resumable with Last-Event-ID within the replay buffer. GET /api/v1/status."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from dataclasses import asdict

from fastapi import APIRouter, Depends, Header, HTTPException, Query
from fastapi.responses import StreamingResponse

from api.config import LOCAL
from api.context import ApiContext, refusal
from api.feed import FeedClient, FeedFull, FeedItem, Resume
from api.models import FeedStatus, StatusView, refusals
from api.sse import KEEPALIVE, KEEPALIVE_S, SSE_HEADERS, sse
from bus import EVENT_TYPES

REFUSALS = refusals(401, 403, 404, 422, 429)
_TYPE = "(" + "|".join(EVENT_TYPES) + ")"
TYPES_PATTERN = rf"^\s*{_TYPE}?(\s*,\s*{_TYPE}?)*\s*$"  # the schema's; the route refuses others naming them
LAST_ID = re.compile(r"[0-9]{1,19}")  # ids grow across runs (api/feed.py); never past a 64-bit id


def item_sse(item: FeedItem) -> str:
    return sse(item.data, event=item.type, id=item.id)


def router(ctx: ApiContext) -> APIRouter:
    api = APIRouter(tags=["events"])
    reader = Depends(ctx.need("read"))

    @api.get(
        "/api/v1/events",
        responses={**REFUSALS, 200: {"content": {"text/event-stream": {}}, "description": "event records"}},
        summary="The live feed of events (Server-Sent Events)",
    )
    async def events(
        types: str | None = Query(
            None,
            description=f"comma-separated types: {', '.join(EVENT_TYPES)}",
            json_schema_extra={"pattern": TYPES_PATTERN},
        ),
        stream: str | None = Query(None, description="only this stream's events"),
        last_event_id: str = Header(
            "", description="resume after this event id", json_schema_extra={"pattern": r"^\s*([0-9]{1,19})?\s*$"}
        ),
        token=reader,
    ):
        """A client that falls --api-sse-queue events behind is sent a `dropped` event and closed (counted in
        /api/v1/status); it may reconnect with Last-Event-ID. A `gap` event says how many events were no longer
        kept for a resuming client; a `reset` event, that its id was of an earlier run (what follows is this
        run's, from its start)."""
        wanted = _types(types)
        ctx.stream_named(stream)
        last = _last_id(last_event_id)
        try:
            owner = None if token is LOCAL else token.name  # without tokens (loopback) no share per owner
            client, resume = ctx.feed.subscribe(asyncio.get_running_loop(), wanted, stream, last, owner)
        except FeedFull as err:
            raise refusal(err) from None
        return StreamingResponse(_feed(ctx, client, resume), media_type="text/event-stream", headers=SSE_HEADERS)

    @api.get("/api/v1/status", response_model=StatusView, responses=REFUSALS, summary="Counts of the running API")
    def status(token=reader):
        return StatusView(
            streams=len(ctx.desk.desk_streams()),
            rounds=ctx.desk.rounds,
            questions_waiting=ctx.asks.waiting(),
            runtime_watches=len(ctx.watches.list()),
            feed=FeedStatus(**asdict(ctx.feed.stats)),
        )

    return api


def _types(text: str | None) -> frozenset[str] | None:
    if not text:
        return None
    wanted = frozenset(t.strip() for t in text.split(",") if t.strip())
    unknown = sorted(wanted - set(EVENT_TYPES))
    if unknown:
        raise HTTPException(422, f"unknown event type(s) {', '.join(unknown)}; types: {', '.join(EVENT_TYPES)}")
    return wanted


def _last_id(text: str | None) -> int | None:
    """The event id a client resumes after (None: none given). 422 for anything the feed never sent: not ASCII
    digits (str.isdigit takes "²", int() does not), or longer than a 64-bit id (int() refuses 5,000 digits)."""
    if text is None or not text.strip():
        return None
    if not LAST_ID.fullmatch(text.strip()):
        raise HTTPException(422, f"Last-Event-ID must be an event id (a whole number), got {text[:40]!r}")
    return int(text.strip())


async def _feed(ctx: ApiContext, client: FeedClient, resume: Resume) -> AsyncIterator[str]:
    try:
        yield ": connected\n\n"
        if resume.reset:
            restarted = "the assistant restarted since that Last-Event-ID: what follows is this run's, from its start"
            yield sse({"detail": restarted}, event="reset")
        if resume.missed:
            yield sse({"missed": resume.missed, "detail": "events no longer kept (--api-replay)"}, event="gap")
        for item in resume.kept:
            yield item_sse(item)
        while True:
            items = await client.mailbox.take(KEEPALIVE_S)
            if client.dropped:
                gone = "this client fell behind and was dropped; reconnect with Last-Event-ID"
                yield sse({"detail": gone}, event="dropped")
                return
            if not items:
                yield KEEPALIVE
            for item in items:
                yield item_sse(item)
    finally:
        ctx.feed.unsubscribe(client)
