"""What a chat request asks: OpenAI's request body, the options this assistant cannot honour (refused by name),
the answer's token limit, and the question made of the messages.

Refused with 400 naming the option in `param`: `n` other than 1 (one answer per question), `tools` or
`functions` (unless `tool_choice` / `function_call` is "none": the assistant calls no tools), `response_format`
other than `{"type": "text"}`, `logprobs` true or `top_logprobs` (the answers' probabilities are not kept).
Accepted and ignored: `temperature`, `top_p`, `user`, `seed`, `presence_penalty`, `frequency_penalty`, `stop`
and any other field (the answer is greedy and as long as the model makes it, up to the token limit).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from api.openai_errors import OpenAIError
from api.openai_reply import SEEN_AT_LINE

CONTEXT_CHARS = 600


@dataclass
class ChatMessage:
    role: str
    content: str | list[dict[str, Any]] | None = None


@dataclass
class StreamOptions:
    """include_usage: a last chunk (choices [], usage) before `data: [DONE]`; every other chunk has usage null."""

    include_usage: bool = False


@dataclass
class ChatRequest:
    """OpenAI's chat request. max_tokens / max_completion_tokens: each stream's answer is cut to at most that many
    tokens (the smaller when both are given; the server's --max-new-tokens bounds it anyway). The options of the
    module's docstring are refused; other fields are accepted and ignored."""

    model: str
    messages: list[ChatMessage]
    stream: bool = False
    stream_options: StreamOptions | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    n: int | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    functions: list[dict[str, Any]] | None = None
    function_call: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    temperature: float | None = None
    user: str | None = None

    @property
    def include_usage(self) -> bool:
        return bool(self.stream and self.stream_options and self.stream_options.include_usage)


def _unsupported(param: str, message: str, code: str = "unsupported_value") -> OpenAIError:
    return OpenAIError(400, message, param=param, code=code)


def refuse_unsupported(body: ChatRequest) -> None:
    """OpenAIError 400 naming the first option of `body` that cannot be honoured (the module's docstring)."""
    if body.n is not None and body.n != 1:
        raise _unsupported("n", f"n must be 1 (one answer per question), got {body.n}")
    tool_options = (
        ("tools", body.tools, "tool_choice", body.tool_choice),
        ("functions", body.functions, "function_call", body.function_call),
    )
    for name, tools, choice_name, choice in tool_options:
        if tools and choice != "none":
            raise _unsupported(
                name,
                f"{name} are not supported: the assistant answers from what the cameras show and calls no tools "
                f'(leave {name} out, or set {choice_name} to "none")',
                "unsupported_parameter",
            )
    kind = (body.response_format or {}).get("type", "text")
    if kind != "text":
        raise _unsupported(
            "response_format", f'response_format must be {{"type": "text"}}: answers are plain text, got {kind!r}'
        )
    if body.logprobs:
        raise _unsupported("logprobs", "logprobs are not supported: the answers' token probabilities are not kept")
    if body.top_logprobs:
        raise _unsupported("top_logprobs", "top_logprobs are not supported: the token probabilities are not kept")


def token_limit(body: ChatRequest) -> int | None:
    """The most tokens of each stream's answer the reply may hold (None: the server's own cap); OpenAIError 400
    for a limit below 1."""
    asked = {"max_tokens": body.max_tokens, "max_completion_tokens": body.max_completion_tokens}
    given = {name: value for name, value in asked.items() if value is not None}
    for name, value in given.items():
        if value < 1:
            raise _unsupported(name, f"{name} must be at least 1, got {value}", "invalid_value")
    return min(given.values()) if given else None


def text_of(content: str | list[dict[str, Any]] | None) -> str:
    """A message's text (the text parts of a list of parts)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return " ".join(str(part.get("text", "")) for part in content if part.get("type") == "text")


def without_evidence(text: str) -> str:
    """An earlier assistant turn without the server's own "Seen at ..." line (the model did not say it)."""
    return SEEN_AT_LINE.sub("", text).strip()


def _turn(message: ChatMessage) -> str:
    text = text_of(message.content)
    return without_evidence(text) if message.role == "assistant" else text


def question_of(messages: list[ChatMessage], limit: int) -> str:
    """The last user message, with the latest earlier turns in front as one context line, fitting `limit`.
    OpenAIError: no user message, or the last one has no text (400), or it is longer than `limit` (413)."""
    users = [k for k, m in enumerate(messages) if m.role == "user"]
    if not users:
        raise OpenAIError(400, "no user message: the last user message is the question", param="messages")
    last = users[-1]
    question = text_of(messages[last].content).strip()
    if not question:
        content = messages[last].content
        images = isinstance(content, list) and any(part.get("type") != "text" for part in content)
        why = "it has no text"
        if images:
            why = "it has only images: the assistant does not read images sent to it, the camera is the image"
        raise OpenAIError(
            400,
            f"the last user message is the question, and {why}; send the question as text",
            param=f"messages[{last}].content",
            code="no_text",
        )
    if len(question) > limit:
        raise OpenAIError(
            413,
            f"the question is too long ({len(question)} characters; at most {limit})",
            param=f"messages[{last}].content",
            code="context_length_exceeded",
        )
    turns = [
        f"{m.role}: {' '.join(turn.split())}"
        for m in messages[:last]
        if m.role in ("user", "assistant") and (turn := _turn(m)).strip()
    ]
    room = min(CONTEXT_CHARS, limit - len(question) - 40)
    context = ""
    for turn in reversed(turns):
        candidate = turn if not context else f"{turn} | {context}"
        if len(candidate) > room:
            break
        context = candidate
    return f"(Earlier in this conversation: {context})\n{question}" if context else question
