"""POST /api/v1/ask: a question to one stream or all; the answer as JSON, or streamed as Server-Sent Events as it
is decoded (`start`, `answer_start`, `piece`s, then one final `answer` event with the whole result)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import StreamingResponse

from api.asking import PendingAsk
from api.auth import question_owner
from api.context import ApiContext, refusal
from api.models import BODY_UNREADABLE, AskRequest, AskResult, Problem, refusals
from api.sse import KEEPALIVE, KEEPALIVE_S, SSE_HEADERS, sse
from bus import Answer, AnswerPiece, AnswerStart, ErrorEvent, to_record

REFUSALS = refusals(401, 403, 404, 413, 422, 429)


async def open_ask(ctx: ApiContext, question: str, stream: str | None, owner: str) -> PendingAsk:
    """Checks and queues the question (HTTPException: 413 too long, 404 unknown stream, 422, 429). Queued off the
    event loop: on a fleet it waits for the stream's host to take it (fleet/api_assistant.py)."""
    limit = ctx.desk.input_limits.max_question_chars
    if isinstance(question, str) and len(question.strip()) > limit:
        raise HTTPException(413, f"the question is too long ({len(question.strip())} characters; at most {limit})")
    ctx.stream_named(stream)
    loop = asyncio.get_running_loop()
    opening = asyncio.ensure_future(asyncio.to_thread(ctx.asks.open, loop, question, stream, owner))
    try:
        return await asyncio.shield(opening)
    except asyncio.CancelledError:  # the client left meanwhile: its question, once queued, is not waited for
        opening.add_done_callback(lambda done: _close_opened(ctx, done))
        raise
    except ValueError as err:
        raise refusal(err) from None


def _close_opened(ctx: ApiContext, done: asyncio.Future) -> None:
    if not done.cancelled() and done.exception() is None:
        ctx.asks.close(done.result())


async def events_of(ctx: ApiContext, pending: PendingAsk) -> AsyncIterator[list]:
    """The request's events as they come (a list per wake-up, [] for a keepalive) until every stream answered or
    failed; TimeoutError after --api-answer-timeout."""
    deadline = time.monotonic() + ctx.settings.answer_timeout_s
    while not pending.done:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        events = await pending.mailbox.take(min(KEEPALIVE_S, left))
        for event in events:
            pending.note(event)
        yield events


def result(pending: PendingAsk) -> AskResult:
    """The reply: each answer and error as its event's record (the same as the feed's and the log's)."""
    return AskResult(
        pending.id,
        pending.streams,
        [to_record(pending.answers[s]) for s in pending.streams if s in pending.answers],
        [to_record(pending.errors[s]) for s in pending.streams if s in pending.errors],
    )


def result_record(pending: PendingAsk) -> dict:
    done = result(pending)
    return {"request": done.request, "streams": done.streams, "answers": done.answers, "errors": done.errors}


def router(ctx: ApiContext) -> APIRouter:
    api = APIRouter(tags=["ask"])
    asker = Depends(ctx.need("ask"))

    @api.post(
        "/api/v1/ask",
        response_model=AskResult,
        responses={**REFUSALS, **BODY_UNREADABLE, 504: {"model": Problem}, 200: {"content": {"text/event-stream": {}}}},
        summary="Ask a question of one stream or every stream",
    )
    async def ask(body: AskRequest, request: Request, token=asker):
        """JSON: waits for every answer. Streaming (`streaming: true` or `Accept: text/event-stream`): events
        `start` {request, streams}, `answer_start` and `piece` records as the answer is decoded, and a final
        `answer` {request, streams, answers, errors} (answers: `answer` records with evidence, timings, round)."""
        pending = await open_ask(ctx, body.question, body.stream, question_owner(token, request.client))
        if body.streaming or "text/event-stream" in request.headers.get("accept", ""):
            return StreamingResponse(_stream(ctx, pending), media_type="text/event-stream", headers=SSE_HEADERS)
        try:
            async for _ in events_of(ctx, pending):
                pass
        except TimeoutError:
            raise HTTPException(504, f"no answer within {ctx.settings.answer_timeout_s:g} s") from None
        finally:
            ctx.asks.close(pending)
        return result(pending)

    return api


async def _stream(ctx: ApiContext, pending: PendingAsk) -> AsyncIterator[str]:
    try:
        yield sse({"request": pending.id, "streams": pending.streams}, event="start")
        async for events in events_of(ctx, pending):
            if not events:
                yield KEEPALIVE
            for event in events:
                if isinstance(event, AnswerStart):
                    yield sse(to_record(event), event="answer_start")
                elif isinstance(event, AnswerPiece):
                    yield sse(to_record(event), event="piece")
                elif isinstance(event, ErrorEvent):
                    yield sse(to_record(event), event="error")
                elif isinstance(event, Answer):
                    pass  # in the final record
        yield sse(result_record(pending), event="answer")
    except TimeoutError:
        yield sse({"detail": f"no answer within {ctx.settings.answer_timeout_s:g} s"}, event="error")
    finally:
        ctx.asks.close(pending)
