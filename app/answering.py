"""Answering on the model worker: one question per stream, in turn, or several at once decoded as one batch
(model.answer_together: the weights read once per step for all of them). A person's question gets the
timeline's notes in front of it when they are on."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

from app.stream import Stream
from app.stream_events import StreamEvents
from bus import Answer, AnswerPiece, AnswerStart, EvidenceSpan
from model.answer_together import AnsweringTogether

logger = logging.getLogger(__name__)


@dataclass
class Question:
    stream: Stream
    text: str
    auto: bool  # the standing question (True) or a person's
    prompt: str | None = None  # the text with timeline notes in front (a person's question)
    cited: list[EvidenceSpan] = field(default_factory=list)  # the notes as evidence
    request: str | None = None  # the API request that asked it (its events carry the id)


class Notes(Protocol):
    """Earlier moments of a stream for a person's question (timeline.notes.TimelineNotes)."""

    def prompt(self, question: str, stream: str, fits: Callable[[str], bool]) -> tuple[str, list[EvidenceSpan]]: ...


class Answerer:
    """Answers questions and publishes `answer_start`, `answer_piece` and `answer` events (with evidence).

    `answer(questions)` returns how many answers it completed. memory_sample: extra fields for answer events.
    stopping: asked between answers given one after another."""

    def __init__(
        self,
        events: StreamEvents,
        notes: Notes | None = None,
        memory_sample: Callable[[], dict] | None = None,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        self.events, self.notes, self.memory_sample, self.stopping = events, notes, memory_sample, stopping
        self._together: tuple[tuple[str, ...], AnsweringTogether] | None = None  # the last group that answered

    def answer(self, questions: list[Question]) -> int:
        if self.notes is not None:
            for question in questions:
                if not question.auto:
                    session = question.stream.session
                    question.prompt, question.cited = self.notes.prompt(
                        question.text, question.stream.name, session.fits
                    )
        if len(questions) > 1 and len({id(q.stream) for q in questions}) == len(questions):
            return self._together_answer(questions)
        done = 0
        for question in questions:
            if self.stopping():
                break
            done += self._alone(question)
        return done

    def forget(self, stream: str) -> None:
        """Drops the kept batch when it holds the stream named `stream` (removed: its cache must go with it)."""
        if self._together is not None and stream in self._together[0]:
            self._together = None

    def _group(self, streams: list[Stream]) -> AnsweringTogether:
        """The batch of these streams; kept while the same group answers again (its buffers stay pooled)."""
        names = tuple(s.name for s in streams)
        if self._together is None or self._together[0] != names:
            self._together = (names, AnsweringTogether([s.session for s in streams]))
        return self._together[1]

    def _together_answer(self, questions: list[Question]) -> int:
        streams = [q.stream for q in questions]
        rounds = [s.session.rounds + 1 for s in streams]
        try:
            pieces = self._group(streams).answer([q.text for q in questions], [q.prompt for q in questions])
        except ValueError as err:
            for question in questions:
                self.events.error(question.stream, "question", str(err), request=question.request)
            return 0
        for question, round_index in zip(questions, rounds, strict=True):
            self._started(question, round_index, batch=len(questions))
        try:
            for row, piece in pieces:
                request = questions[row].request
                self.events.publish(AnswerPiece, streams[row], round=rounds[row], text=piece, request=request)
        except Exception as err:
            logger.exception("answers of %s failed", ", ".join(s.name for s in streams))
            for question, round_index in zip(questions, rounds, strict=True):
                message = f"round {round_index} (answered with {len(streams)} streams) failed: {err}"
                self.events.error(question.stream, "answer", message, request=question.request)
            return 0
        for question in questions:
            self._answered(question, batch=len(questions))
        return len(questions)

    def _alone(self, question: Question) -> int:
        stream, session = question.stream, question.stream.session
        round_index = session.rounds + 1
        try:
            pieces = session.ask(question.text, question.prompt)
        except ValueError as err:
            self.events.error(stream, "question", str(err), request=question.request)
            return 0
        self._started(question, round_index)
        try:
            for piece in pieces:
                self.events.publish(AnswerPiece, stream, round=round_index, text=piece, request=question.request)
        except Exception as err:
            logger.exception("%s: round %d failed", stream.name, round_index)
            self.events.error(stream, "answer", f"round {round_index} failed: {err}", request=question.request)
            return 0
        self._answered(question)
        return 1

    def _started(self, question: Question, round_index: int, batch: int = 1) -> None:
        stream_time = round(question.stream.stream_time, 3)
        fields = {"round": round_index, "question": question.text, "auto": question.auto, "stream_time": stream_time}
        self.events.publish(AnswerStart, question.stream, **fields, batch=batch, request=question.request)

    def _answered(self, question: Question, batch: int = 1) -> None:
        """The `answer` event of a finished round (batch: how many streams' answers were decoded together)."""
        stream = question.stream
        self.events.store_errors(stream)
        stats = stream.session.last_answer
        evidence = tuple(replace(span, stream=stream.name) for span in (*stats.evidence, *question.cited))
        extra = self.memory_sample() if self.memory_sample else {}  # the memory monitor's reading, by field name
        stream_time = round(stream.stream_time, 3)
        self.events.publish(
            Answer,
            stream,
            stats=replace(stats, evidence=evidence),
            auto=question.auto,
            stream_time=stream_time,
            batch=batch,
            request=question.request,
            **extra,
        )
        stream.answers += 1
