"""OpenAI-compatible chat: `GET /v1/models` (a model is a stream, or "all"), `GET /v1/models/{model}` and
`POST /v1/chat/completions` (streamed as `data: {chunk}` lines ending with `data: [DONE]`, or one
`chat.completion`), so OpenAI's clients (Home Assistant's OpenAI-compatible agents, Open WebUI, the `openai`
package) ask the cameras unchanged. Every refusal is OpenAI's error object (api.openai_errors).

What the messages mean: the last `user` message is the question (it must have text: the camera is the image).
Earlier turns (user and assistant, without the server's own "Seen at" lines) are context: the latest of them, at
most CONTEXT_CHARS characters together, go in front of the question as one line ("Earlier in this conversation:
..."), cut so the whole fits --max-question-chars. System messages are ignored (the assistant has its own prompt).
Options it cannot honour are refused by name (api.openai_request); max_tokens cuts each answer
(api.openai_reply). Evidence: the answer's text ends with a line "Seen at ..." naming the moments it drew on, and
the response (the finish chunk when streaming) carries them as `evidence`. The API token (scope `ask`) is the
OpenAI API key.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse

from api.ask import events_of, open_ask
from api.auth import question_owner
from api.context import ApiContext
from api.openai_errors import OpenAIError, OpenAIRoute, error_responses, unknown_route
from api.openai_reply import ChatCompletion, ChatReply, chunks
from api.openai_request import ChatRequest, question_of, refuse_unsupported, token_limit
from api.sse import SSE_HEADERS

ALL = "all"
OWNED_BY = "edge-assistant"


@dataclass
class ModelCard:
    id: str
    object: str = "model"
    created: int = 0
    owned_by: str = OWNED_BY


@dataclass
class ModelList:
    data: list[ModelCard]
    object: str = "list"


def router(ctx: ApiContext) -> APIRouter:
    """The /v1 routes, and last the answer for any other path under /v1 (404 or 405, as the error object)."""
    api = APIRouter(tags=["openai"], route_class=OpenAIRoute)
    asker = Depends(ctx.need("ask"))
    started = int(time.time())

    def names() -> list[str]:
        return [ALL, *ctx.desk.desk_streams()]

    def unknown_model(model: str) -> OpenAIError:
        return OpenAIError(
            404,
            f"no model {model!r}: the models are the streams and 'all': {', '.join(names())} (GET /v1/models)",
            param="model",
            code="model_not_found",
        )

    @api.get(
        "/v1/models", response_model=ModelList, responses=error_responses(401, 403), summary="Streams as OpenAI models"
    )
    def models(token=asker):
        return ModelList([ModelCard(name, created=started) for name in names()])

    @api.get(
        "/v1/models/{model}", response_model=ModelCard, responses=error_responses(401, 403, 404), summary="One model"
    )
    def model_card(model: str, token=asker):
        if model not in names():
            raise unknown_model(model)
        return ModelCard(model, created=started)

    @api.post(
        "/v1/chat/completions",
        response_model=ChatCompletion,
        responses={
            **error_responses(400, 401, 403, 404, 413, 422, 429, 504),
            200: {"content": {"text/event-stream": {}}},
        },
        summary="OpenAI-compatible chat: ask a stream (model) or all",
    )
    async def chat(body: ChatRequest, request: Request, token=asker):
        stream = None if body.model == ALL else body.model
        if stream is not None and stream not in ctx.desk.desk_streams():
            raise unknown_model(body.model)
        refuse_unsupported(body)
        limit = token_limit(body)
        question = question_of(body.messages, ctx.desk.input_limits.max_question_chars)
        reply = ChatReply(await open_ask(ctx, question, stream, question_owner(token, request.client)), limit)
        if body.stream:
            return StreamingResponse(
                chunks(ctx, reply, body.model, body.include_usage), media_type="text/event-stream", headers=SSE_HEADERS
            )
        try:
            async for events in events_of(ctx, reply.pending):
                reply.take(events)
        except TimeoutError:
            message = f"no answer within {ctx.settings.answer_timeout_s:g} s (--api-answer-timeout)"
            raise OpenAIError(504, message) from None
        finally:
            ctx.asks.close(reply.pending)
        return reply.completion(body.model)

    api.routes.append(unknown_route([route for route in api.routes if route.path.startswith("/v1/")]))
    return api
