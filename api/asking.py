"""Questions asked over HTTP: each gets a request id its events carry (AnswerStart, AnswerPiece, Answer and an
ErrorEvent when it fails, see app.answering), routed from the bus to that request's mailbox. A request is done
when every stream it asked has answered or failed. Per-token bound on questions in flight."""

from __future__ import annotations

import asyncio
import secrets
import threading
from dataclasses import dataclass, field

from api.config import LOCAL
from api.mailbox import Mailbox
from bus import Answer, AnswerPiece, AnswerStart, ErrorEvent, Event
from bus.desk import Desk

MAX_EVENTS_PER_ASK = 100_000  # pieces of one request's answers waiting for its client


class TooManyAsks(ValueError):
    """The token has as many questions in flight as it may."""


@dataclass
class PendingAsk:
    id: str
    owner: str
    streams: list[str]
    mailbox: Mailbox
    answers: dict[str, Answer] = field(default_factory=dict)
    errors: dict[str, ErrorEvent] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return all(s in self.answers or s in self.errors for s in self.streams)

    def note(self, event: Event) -> None:
        """Keeps the final events (the client coroutine's thread)."""
        if isinstance(event, Answer) and event.stream is not None:
            self.answers[event.stream] = event
        elif isinstance(event, ErrorEvent) and event.stream is not None:
            self.errors[event.stream] = event


class Asks:
    """Bus subscriber + registry of the questions in flight. per_token: questions one token may have waiting."""

    def __init__(self, assistant: Desk, per_token: int = 4) -> None:
        self.assistant = assistant
        self.per_token = per_token
        self._pending: dict[str, PendingAsk] = {}
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        """The model worker's thread: hands the events of a request to its mailbox; never blocks."""
        request = getattr(event, "request", None)
        if request is None or not isinstance(event, (AnswerStart, AnswerPiece, Answer, ErrorEvent)):
            return
        pending = self._pending.get(request)
        if pending is not None:
            pending.mailbox.put(event)

    def open(self, loop: asyncio.AbstractEventLoop, question: str, stream: str | None, owner: str) -> PendingAsk:
        """Queues the question (ValueError: bad question or unknown stream; AssistantBusy; TooManyAsks)."""
        with self._lock:
            if sum(1 for p in self._pending.values() if p.owner == owner) >= self.per_token:
                who = "this connection" if owner.startswith(f"{LOCAL.name} ") else "this token"  # auth.question_owner
                raise TooManyAsks(
                    f"{who} has {self.per_token} questions waiting for answers, the most it may "
                    "(--api-questions-per-token); wait for an answer first"
                )
            pending = PendingAsk(secrets.token_hex(8), owner, [], Mailbox(loop, MAX_EVENTS_PER_ASK))
            self._pending[pending.id] = pending
        try:
            pending.streams = self.assistant.ask(question, stream, request=pending.id)
        except BaseException:
            self.close(pending)
            raise
        return pending

    def close(self, pending: PendingAsk) -> None:
        pending.mailbox.close()
        with self._lock:
            self._pending.pop(pending.id, None)

    def waiting(self) -> int:
        with self._lock:
            return len(self._pending)
