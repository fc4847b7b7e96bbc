"""OpenAI-compatible chat: `GET /v1/models` (a model is a stream, or "all") and `POST /v1/chat/completions`
(streamed as `data: {chunk}` lines ending with `data: [DONE]`, or one `chat.completion`), so OpenAI's clients
(Home Assistant's OpenAI-compatible agents, Open WebUI, the `openai` package) ask the cameras unchanged.

What the messages mean: the last `user` message is the question. Earlier turns (user and assistant) are context:
the latest of them, at most CONTEXT_CHARS characters together, go in front of the question as one line
("Earlier in this conversation: ..."), cut so the whole fits --max-question-chars. System messages are ignored
(the assistant has its own prompt). Evidence: the answer's text ends with a line "Seen at ..." naming the moments
it drew on, and the response (the last chunk when streaming) carries them as `evidence`. The API token (scope
`ask`) is the OpenAI API key.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Depends, HTTPException
from fastapi.responses import StreamingResponse

from api.ask import events_of, open_ask
from api.asking import PendingAsk
from api.context import ApiContext
from api.models import Problem
from api.sse import SSE_HEADERS, sse
from bus import AnswerPiece, EvidenceSpan
from bus.records import evidence_record

ALL = "all"
CONTEXT_CHARS = 600
OWNED_BY = "edge-assistant"
REFUSALS = {code: {"model": Problem} for code in (401, 403, 404, 413, 422, 429, 504)}


@dataclass
class ChatMessage:
    role: str
    content: str | list[dict[str, Any]] | None = None


@dataclass
class ChatRequest:
    """OpenAI's chat request; fields this assistant does not use (temperature, max_tokens, ...) are accepted and
    ignored."""

    model: str
    messages: list[ChatMessage]
    stream: bool = False
    temperature: float | None = None
    max_tokens: int | None = None
    user: str | None = None


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


@dataclass
class ChoiceMessage:
    role: str
    content: str


@dataclass
class Choice:
    index: int
    message: ChoiceMessage
    finish_reason: str = "stop"


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


@dataclass
class ChatCompletion:
    """OpenAI's `chat.completion`, plus `evidence` (the moments the answer drew on) and `request` (the id of the
    question's events)."""

    id: str
    created: int
    model: str
    choices: list[Choice]
    usage: Usage
    object: str = "chat.completion"
    evidence: list[dict] = field(default_factory=list)
    request: str = ""


def text_of(content: str | list[dict[str, Any]] | None) -> str:
    """A message's text (the text parts of a list of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return " ".join(str(part.get("text", "")) for part in content if part.get("type") == "text")


def question_of(messages: list[ChatMessage], limit: int) -> str:
    """The last user message, with the latest earlier turns in front as one context line, fitting `limit`."""
    users = [k for k, m in enumerate(messages) if m.role == "user" and text_of(m.content).strip()]
    if not users:
        raise HTTPException(422, "no user message: the last user message is the question")
    last = users[-1]
    question = text_of(messages[last].content).strip()
    if len(question) > limit:
        raise HTTPException(413, f"the question is too long ({len(question)} characters; at most {limit})")
    turns = [
        f"{m.role}: {' '.join(text_of(m.content).split())}"
        for m in messages[:last]
        if m.role in ("user", "assistant") and text_of(m.content).strip()
    ]
    room = min(CONTEXT_CHARS, limit - len(question) - 40)
    context = ""
    for turn in reversed(turns):
        candidate = turn if not context else f"{turn} | {context}"
        if len(candidate) > room:
            break
        context = candidate
    return f"(Earlier in this conversation: {context})\n{question}" if context else question


def seen_at(evidence: Sequence[EvidenceSpan]) -> str:
    """The evidence as one line of text: "Seen at door 12-16 s (attention), yard 40-44 s (timeline)"."""
    parts = []
    for span in evidence[:5]:
        where = " ".join(p for p in (span.stream or "", f"{span.start:.0f}-{span.end:.0f} s") if p)
        parts.append(f"{where} ({span.source})" if span.source else where)
    return "Seen at " + ", ".join(parts) if parts else ""


def answer_text(pending: PendingAsk, several: bool) -> tuple[str, list[dict], int]:
    """The whole reply: each stream's answer (named when several), its errors, the "Seen at" line; the evidence
    as records (`bus.records.evidence_record`) for the response's `evidence` field."""
    lines, evidence, tokens = [], [], 0
    for stream in pending.streams:
        if stream in pending.answers:
            answer = pending.answers[stream]
            lines.append(f"[{stream}] {answer.answer.strip()}" if several else answer.answer.strip())
            evidence += answer.evidence
            tokens += answer.stats.answer_tokens
        elif stream in pending.errors:
            lines.append(f"[{stream}] (no answer: {pending.errors[stream].message})")
    seen = seen_at(evidence)
    return "\n".join(lines) + (f"\n\n{seen}" if seen else ""), [evidence_record(s) for s in evidence], tokens


def router(ctx: ApiContext) -> APIRouter:
    api = APIRouter(tags=["openai"])
    asker = Depends(ctx.need("ask"))
    started = int(time.time())

    @api.get("/v1/models", response_model=ModelList, responses=REFUSALS, summary="Streams as OpenAI models")
    def models(token=asker):
        names = [ALL, *ctx.assistant.streams]
        return ModelList([ModelCard(name, created=started) for name in names])

    @api.post(
        "/v1/chat/completions",
        response_model=ChatCompletion,
        responses={**REFUSALS, 200: {"content": {"text/event-stream": {}}}},
        summary="OpenAI-compatible chat: ask a stream (model) or all",
    )
    async def chat(body: ChatRequest, token=asker):
        stream = None if body.model == ALL else body.model
        if stream is not None and stream not in ctx.assistant.streams:
            raise HTTPException(404, f"no model {body.model!r}: models are the streams and 'all' (GET /v1/models)")
        limit = ctx.assistant.input_limits.max_question_chars
        pending = await open_ask(ctx, question_of(body.messages, limit), stream, token.name)
        several = stream is None and len(pending.streams) > 1
        if body.stream:
            return StreamingResponse(
                _chunks(ctx, pending, body.model, several), media_type="text/event-stream", headers=SSE_HEADERS
            )
        try:
            async for _ in events_of(ctx, pending):
                pass
        except TimeoutError:
            raise HTTPException(504, f"no answer within {ctx.settings.answer_timeout_s:g} s") from None
        finally:
            ctx.asks.close(pending)
        text, evidence, tokens = answer_text(pending, several)
        return ChatCompletion(
            id=f"chatcmpl-{pending.id}",
            created=int(time.time()),
            model=body.model,
            choices=[Choice(0, ChoiceMessage("assistant", text))],
            usage=Usage(completion_tokens=tokens, total_tokens=tokens),
            evidence=evidence,
            request=pending.id,
        )

    return api


def _chunk(pending: PendingAsk, model: str, delta: dict, finish: str | None = None, **extra) -> str:
    record = {
        "id": f"chatcmpl-{pending.id}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }
    return sse(record)


async def _chunks(ctx: ApiContext, pending: PendingAsk, model: str, several: bool) -> AsyncIterator[str]:
    """One stream: its pieces as they are decoded. Several ("all"): each stream's answer once it is whole (their
    pieces interleave while decoded together). Then the "Seen at" line, the finish chunk with `evidence`, [DONE]."""
    try:
        yield _chunk(pending, model, {"role": "assistant", "content": ""})
        try:
            async for events in events_of(ctx, pending):
                if several:
                    continue
                for event in events:
                    if isinstance(event, AnswerPiece) and event.text:
                        yield _chunk(pending, model, {"content": event.text})
        except TimeoutError:
            yield _chunk(pending, model, {"content": f"(no answer within {ctx.settings.answer_timeout_s:g} s)"})
        text, evidence, _ = answer_text(pending, several)
        if several:
            yield _chunk(pending, model, {"content": text})
        else:
            tail = text[text.rfind("\n\nSeen at ") :] if "\n\nSeen at " in text else ""
            errors = [f"(no answer: {e.message})" for e in pending.errors.values()]
            extra = tail + ("\n".join(errors) if errors else "")
            if extra:
                yield _chunk(pending, model, {"content": extra})
        yield _chunk(pending, model, {}, finish="stop", evidence=evidence, request=pending.id)
        yield "data: [DONE]\n\n"
    finally:
        ctx.asks.close(pending)
