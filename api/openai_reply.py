"""The reply to one chat request, made of its question's events (api.asking.PendingAsk): each stream's answer as
the client gets it (cut to the request's token limit), the "Seen at" line, the evidence, `usage` and
`finish_reason`; as one `chat.completion` or as `chat.completion.chunk`s.

The token limit (`max_tokens`, `max_completion_tokens`) is applied here, to the pieces streamed back, not by the
model: a question carries no limit of its own to the model worker (the page's, the terminal's, MQTT's and the
API's questions share one decode loop and its --max-new-tokens), so the worker decodes each answer to its own cap
and the reply keeps the first `limit` pieces of each stream's answer (the `answer` event, the log and the timeline
keep it whole). A piece is one decoded token, except where one character spans several tokens: those come as one
piece and count as one. finish_reason: "length" when an answer was cut so, "stop" otherwise (an answer the model
ended at its own --max-new-tokens too: the API, a fleet's head included, does not know the model's cap).

usage: prompt_tokens counts the question as the model got it (with the conversation's line and the timeline's
notes; the video in the cache is not counted), completion_tokens the answers' tokens as sent, every stream's
together (the `answer` events' counts; a cut answer's pieces kept).
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import asdict, dataclass, field

from api.ask import events_of
from api.asking import PendingAsk
from api.context import ApiContext
from api.openai_errors import error_record
from api.sse import sse
from bus import AnswerPiece, EvidenceSpan
from bus.records import evidence_record

DONE = "data: [DONE]\n\n"
_MOMENT = r"(?:[a-z0-9][a-z0-9_-]* )?\d+-\d+ s(?: \([a-z_-]+\))?"  # "door 12-16 s (attention)": seen_at's parts
SEEN_AT_LINE = re.compile(rf"^Seen at {_MOMENT}(?:, {_MOMENT})*[ \t]*$", re.MULTILINE)  # seen_at's whole line


@dataclass
class ChoiceMessage:
    role: str
    content: str


@dataclass
class Choice:
    """finish_reason: "length" when the token limit cut an answer, else "stop"."""

    index: int
    message: ChoiceMessage
    finish_reason: str = "stop"


@dataclass
class Usage:
    """Tokens: the question as the model got it (prompt), the answers as sent (completion)."""

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


def seen_at(evidence: Sequence[EvidenceSpan]) -> str:
    """The evidence as one line of text: "Seen at door 12-16 s (attention), yard 40-44 s (timeline)"
    (SEEN_AT_LINE finds it again in an earlier turn)."""
    parts = []
    for span in evidence[:5]:
        where = " ".join(p for p in (span.stream or "", f"{span.start:.0f}-{span.end:.0f} s") if p)
        parts.append(f"{where} ({span.source})" if span.source else where)
    return "Seen at " + ", ".join(parts) if parts else ""


@dataclass
class Cut:
    """One stream's answer as the client gets it: its first `limit` pieces (None: all of them). cut: a piece
    past the limit came (and was left out)."""

    limit: int | None
    pieces: list[str] = field(default_factory=list)
    cut: bool = False

    def take(self, text: str) -> str:
        """What of this piece the client gets: all of it, or "" past the limit."""
        if self.cut or not text:
            return ""
        if self.limit is not None and len(self.pieces) >= self.limit:
            self.cut = True
            return ""
        self.pieces.append(text)
        return text


class ChatReply:
    """The reply to the question `pending`, each stream's answer cut to `limit` tokens (None: not cut). Feed it
    every event of the question (`take`), then read the whole of it."""

    def __init__(self, pending: PendingAsk, limit: int | None) -> None:
        self.pending = pending
        self._limit = limit
        self._cuts: dict[str, Cut] = {}

    @property
    def several(self) -> bool:
        """Several streams were asked (model "all"): each answer is named, and streamed once it is whole."""
        return len(self.pending.streams) > 1

    @property
    def cut(self) -> bool:
        return any(cut.cut for cut in self._cuts.values())

    @property
    def finish_reason(self) -> str:
        return "length" if self.cut else "stop"

    def take(self, events: list) -> str:
        """The text these events add to the reply (their answer pieces, each stream's up to the limit)."""
        text = ""
        for event in events:
            if isinstance(event, AnswerPiece) and event.stream is not None:
                text += self._cuts.setdefault(event.stream, Cut(self._limit)).take(event.text)
        return text

    def answer(self, stream: str) -> str:
        """One stream's answer as sent: whole, or its pieces up to the limit."""
        cut = self._cuts.get(stream)
        if cut is not None and cut.cut:
            return "".join(cut.pieces).strip()
        return self.pending.answers[stream].answer.strip()

    def evidence(self) -> list[EvidenceSpan]:
        answers = self.pending.answers
        return [span for stream in self.pending.streams if stream in answers for span in answers[stream].evidence]

    def text(self) -> str:
        """The whole reply: each stream's answer (named when several), its errors, the "Seen at" line."""
        lines = []
        for stream in self.pending.streams:
            if stream in self.pending.answers:
                answer = self.answer(stream)
                lines.append(f"[{stream}] {answer}" if self.several else answer)
            elif stream in self.pending.errors:
                lines.append(f"[{stream}] (no answer: {self.pending.errors[stream].message})")
        seen = seen_at(self.evidence())
        return "\n".join(lines) + (f"\n\n{seen}" if seen else "")

    def tail(self) -> str:
        """What follows one stream's streamed pieces: the "Seen at" line, or why there is no answer."""
        seen = seen_at(self.evidence())
        errors = [f"(no answer: {error.message})" for error in self.pending.errors.values()]
        return (f"\n\n{seen}" if seen else "") + "\n".join(errors)

    def usage(self) -> Usage:
        """The answered streams' tokens as their answer events count them (a cut answer: the pieces kept); a
        stream whose question failed counts none."""
        prompt = completion = 0
        for stream, answer in self.pending.answers.items():
            cut = self._cuts.get(stream)
            prompt += answer.stats.prefill_tokens
            completion += len(cut.pieces) if cut is not None and cut.cut else answer.stats.answer_tokens
        return Usage(prompt, completion, prompt + completion)

    def completion(self, model: str) -> ChatCompletion:
        return ChatCompletion(
            id=f"chatcmpl-{self.pending.id}",
            created=int(time.time()),
            model=model,
            choices=[Choice(0, ChoiceMessage("assistant", self.text()), self.finish_reason)],
            usage=self.usage(),
            evidence=[evidence_record(span) for span in self.evidence()],
            request=self.pending.id,
        )


async def chunks(ctx: ApiContext, reply: ChatReply, model: str, include_usage: bool) -> AsyncIterator[str]:
    """The reply streamed: the role, then one stream's pieces as they are decoded (several ("all"): each stream's
    answer once it is whole; their pieces interleave while decoded together), the "Seen at" line, the finish
    chunk (finish_reason, `evidence`, `request`), with include_usage a last chunk with `choices: []` and `usage`
    (every other chunk has `usage: null`), then `data: [DONE]`. No answer within --api-answer-timeout: an error
    object (as OpenAI sends one mid-stream: the `openai` package raises it), then [DONE]."""
    pending = reply.pending
    usage_field = {"usage": None} if include_usage else {}

    def chunk(choices: list[dict], **extra) -> str:
        head = {"id": f"chatcmpl-{pending.id}", "object": "chat.completion.chunk", "created": int(time.time())}
        return sse({**head, "model": model, "choices": choices, **usage_field, **extra})

    def delta(content: dict, finish: str | None = None, **extra) -> str:
        return chunk([{"index": 0, "delta": content, "finish_reason": finish}], **extra)

    try:
        yield delta({"role": "assistant", "content": ""})
        try:
            async for events in events_of(ctx, pending):
                text = reply.take(events)
                if text and not reply.several:
                    yield delta({"content": text})
        except TimeoutError:
            message = f"no answer within {ctx.settings.answer_timeout_s:g} s (--api-answer-timeout)"
            yield sse(error_record(504, message))
            yield DONE
            return
        rest = reply.text() if reply.several else reply.tail()
        if rest:
            yield delta({"content": rest})
        evidence = [evidence_record(span) for span in reply.evidence()]
        yield delta({}, reply.finish_reason, evidence=evidence, request=pending.id)
        if include_usage:
            yield chunk([], usage=asdict(reply.usage()))
        yield DONE
    finally:
        ctx.asks.close(pending)
