"""Several streams answering at the same moment, their decode steps batched into one forward per token.

    together = AnsweringTogether([session_a, session_b, session_c])   # keep it: it holds the batch pool
    for row, piece in together.answer(["What is happening?"] * 3):  # or answer_together(sessions, questions)
        print(row, piece)
    session_a.last_answer                                           # AnswerStats, as a lone ask() fills it

Each session answers exactly as its `ask()` would (greedy: token for token, up to the float rounding of
batched products): its own recall, question prefill and eviction (one session after another), then one
batched decode step per token for every row still answering (`cache.batch_decode.BatchDecoder`; rows whose
policy cannot take the static step, `full` and `h2o`, decode one after another inside it), and each turn
is closed as a lone answer closes it. Rows finish at their own end-of-turn or `max_new_tokens`; a stop
requested of a session ends its row (cut_off); the app's one stop, shared by every session, ends them all.
Time to first token and decode speed in `last_answer` are those of the batch.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from cache.batch_decode import BatchDecoder
from model.answer_turn import AnswerTurn
from model.session import StreamingSession


class AnsweringTogether:
    """A fixed group of sessions (distinct streams, one loaded model) whose answers decode as one batch.

    The batch pool (every session's cache buffers as rows of shared tensors) is made at the first batched
    step and kept, so later rounds of the same group copy nothing; a new group copies each cache in once.
    """

    def __init__(self, sessions: Sequence[StreamingSession]) -> None:
        if len({id(s) for s in sessions}) != len(sessions):
            raise ValueError("a session can answer only once per batch")
        if len({id(s.loaded.model) for s in sessions}) > 1:
            raise ValueError("sessions that answer together must share one loaded model")
        self.sessions = list(sessions)
        self.decoder = BatchDecoder([s.runner for s in self.sessions])

    def answer(
        self, questions: Sequence[str] | str, prompts: Sequence[str | None] | None = None
    ) -> Iterator[tuple[int, str]]:
        """Answers `questions[i]` on session i (one string: the same question on every session); `prompts[i]`,
        when given, is what session i's model is asked instead (see `StreamingSession.ask`).

        Returns an iterator of (row, text piece). Bad questions raise ValueError here, before any cache
        changes. Each session's `last_answer` is filled once the iterator is exhausted."""
        if isinstance(questions, str):
            questions = [questions] * len(self.sessions)
        if len(questions) != len(self.sessions):
            raise ValueError(f"{len(questions)} questions for {len(self.sessions)} sessions")
        prompts = prompts or [None] * len(questions)
        segments = [s.question_segment(p or q) for s, q, p in zip(self.sessions, questions, prompts, strict=True)]
        return self._answer([q.strip() for q in questions], segments)

    def _answer(self, questions: list[str], segments: list) -> Iterator[tuple[int, str]]:
        sessions = self.sessions
        turns: list[AnswerTurn] = []
        try:
            for session, question, segment in zip(sessions, questions, segments, strict=True):
                turns.append(session.open_turn(question, segment))  # recall + prefill, one after another
            answering = list(range(len(sessions)))
            while answering:
                feed: list[int | None] = [None] * len(sessions)
                for row in answering:
                    piece, feed[row] = sessions[row].advance(turns[row])
                    if piece:
                        yield row, piece
                answering = [row for row in answering if feed[row] is not None]
                if answering:
                    logits = self.decoder.step(feed)  # one forward for every row still answering
                    for row in answering:
                        turns[row].feed(logits[row])
            for row, (session, turn) in enumerate(zip(sessions, turns, strict=True)):
                rest = session.answer_rest(turn)
                if rest:
                    yield row, rest
        finally:
            for session, turn in zip(sessions, turns, strict=False):  # the turns opened so far
                session.close_turn(turn)
        for session, turn in zip(sessions, turns, strict=True):
            session.record_turn(turn)


def answer_together(sessions: Sequence[StreamingSession], questions: Sequence[str] | str) -> Iterator[tuple[int, str]]:
    """One round of `AnsweringTogether(sessions).answer(questions)` (a group kept for many rounds reuses its
    batch pool; this makes a new one, copying each cache in once)."""
    return AnsweringTogether(sessions).answer(questions)
