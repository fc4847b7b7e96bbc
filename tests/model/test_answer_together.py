"""Sessions answering together (one batched decode step per token) answer as each does alone.

Tiny random VLMs with real clips ingested per session: streams of different lengths (so each evicted
differently), different answer caps (rows finish at different steps), recall on for one group. Answers,
streamed pieces, metrics other than timing, and the caches after the closed turns must equal those of
each session asking alone (the hybrid's linear-attention states too, so that the next clip continues from
them); nothing of one stream may reach another's answer.
"""

import dataclasses

import pytest
import torch

from cache.config import CacheConfig
from model.answer_together import AnsweringTogether, answer_together
from model.session import SessionConfig, StreamingSession
from tests.support.model_fixtures import random_frames
from tests.support.session_helpers import TINY_FAMILIES, loaded

BUDGET = 160
TOLERANCE = 1e-5  # on logits and linear-attention states: batched products may round otherwise than one row's
TIMING = {"ttft_s", "decode_tokens_per_s", "process_rss_bytes", "recall_ms", "evict_ms"}


def _session(family: str, policy: str, clips: list[int], max_new: int = 8, recall: int = 0) -> StreamingSession:
    """A session that has watched clips of random frames (seeds `clips`, 3-5 frames each)."""
    store = dict(recall=recall, block=16, store_bytes=2**24) if recall else {}
    config = CacheConfig(policy=policy, budget=BUDGET, window=8, **store)
    session = StreamingSession(loaded(family), config, SessionConfig(max_new_tokens=max_new, chunk_size=64))
    for i, seed in enumerate(clips):
        session.ingest_clip(random_frames(3 + seed % 3, seed=seed), 4.0 * i, 4.0 * (i + 1))
    return session


def _metrics(session: StreamingSession) -> dict:
    return {k: v for k, v in dataclasses.asdict(session.last_answer).items() if k not in TIMING}


def _state(session: StreamingSession) -> list:
    cache = session.cache
    return [cache.next_position, cache.tokens_seen, cache.evictions, cache.get_seq_length()] + [
        (layer.token_index.tolist(), layer.positions.tolist()) for layer in cache.kv_layers[:1] + cache.kv_layers[-1:]
    ]


def _linear_states(session: StreamingSession) -> list[torch.Tensor]:
    """Copies of the hybrid's linear-attention states, conv and recurrent per layer (none on the other families)."""
    return [state for _, conv, recurrent in session.cache.save_states() for state in (conv[0], recurrent[0])]


def _assert_close(got: list[torch.Tensor], want: list[torch.Tensor]) -> None:
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b, atol=TOLERANCE, rtol=TOLERANCE)


def _close(a: torch.Tensor, b: torch.Tensor) -> bool:
    return torch.allclose(a, b, atol=TOLERANCE, rtol=TOLERANCE)


def _answer_alone_and_together(make, questions: list[str]):
    """make(): fresh sessions (the same streams each time). Two rounds each way, the second question after the
    first answer is in the cache (closing a turn together must leave what closing it alone leaves)."""
    alone = make()
    expected = []
    for round_questions in (questions, ["And then?"] * len(questions)):
        texts = ["".join(s.ask(q)) for s, q in zip(alone, round_questions, strict=True)]
        expected.append([(t, s.last_answer_ids, _metrics(s)) for t, s in zip(texts, alone, strict=True)])
    together = make()
    group = AnsweringTogether(together)
    got = []
    for round_questions in (questions, "And then?"):
        texts = [""] * len(together)
        for row, piece in group.answer(round_questions):
            texts[row] += piece
        got.append([(t, s.last_answer_ids, _metrics(s)) for t, s in zip(texts, together, strict=True)])
    assert got == expected
    assert [_state(s) for s in together] == [_state(s) for s in alone]
    for mine, theirs in zip(together, alone, strict=True):
        _assert_close(_linear_states(mine), _linear_states(theirs))
    return together, group


@pytest.mark.parametrize("policy", ["inf-mllm", "window", "h2o"])
@pytest.mark.parametrize("family", TINY_FAMILIES)
def test_answers_together_equal_each_session_alone(family, policy):
    def make():
        return [
            _session(family, policy, [0, 1, 2, 3, 4], max_new=8),
            _session(family, policy, [5], max_new=3),  # short stream, short answers: finishes first
            _session(family, policy, [6, 7, 8], max_new=6),
        ]

    together, group = _answer_alone_and_together(make, ["What is on screen?", "Describe it.", "Who is there?"])
    assert all(s.last_answer.answer_tokens > 0 for s in together)
    assert any(s.cache.evictions for s in together)
    assert (group.decoder.batched_steps > 0) == (policy != "h2o")  # h2o scores every step: its rows decode alone


@pytest.mark.parametrize("family", ["tiny-qwen2-vl", "tiny-qwen3.5"])
def test_answers_together_with_recall_equal_each_session_alone(family):
    def make():
        return [
            _session(family, "streaming-llm", list(range(8)), recall=64),
            _session(family, "inf-mllm", [9, 10, 11, 12], recall=64, max_new=5),
        ]

    together, group = _answer_alone_and_together(make, ["What happened at the start?"] * 2)
    assert any(s.last_answer.recalled_tokens > 0 for s in together)
    assert group.decoder.batched_steps > 0


@pytest.mark.parametrize("family", TINY_FAMILIES)
def test_nothing_of_one_stream_reaches_another(family):
    """Stream A's answers, and after every decode step its logits and linear-attention states, are the same whether
    stream B, in the same batch, saw clip X and was asked one question or saw clip Y and was asked another. Logits
    and states, not only tokens: the tiny Qwen3.5's greedy answers follow neither, and its linear states forget
    all but the last few tokens (fast-decaying random gates), so B's question is varied too: it is what B's
    states hold while it answers."""

    def run(b_clip: int, b_question: str) -> tuple[list, list[list[torch.Tensor]], list[list[torch.Tensor]]]:
        a = _session(family, "inf-mllm", [1, 2, 3], max_new=10)
        b = _session(family, "inf-mllm", [b_clip], max_new=10)
        group = AnsweringTogether([a, b])
        decoder = group.decoder
        seen: list[list[list[torch.Tensor]]] = [[], []]  # per stream and decode step: [logits, *linear states]
        step = decoder.step

        def recorded_step(tokens):
            out = step(tokens)
            for row, session in enumerate((a, b)):
                if out[row] is not None:
                    seen[row].append([out[row].clone(), *_linear_states(session)])
            return out

        decoder.step = recorded_step
        answers = []
        for a_question, question in (("What is on screen?", b_question), ("What next?", "What next?")):
            for _ in group.answer([a_question, question]):
                pass
            answers.append((a.last_answer_ids, _state(a)))
        assert decoder.batched_steps > 0
        return answers, *seen

    answers_x, a_with_x, b_with_x = run(b_clip=20, b_question="Describe it.")
    answers_y, a_with_y, b_with_y = run(b_clip=21, b_question="Who is there, and where?")
    assert answers_x == answers_y
    assert len(a_with_x) == len(a_with_y)
    for got, want in zip(a_with_x, a_with_y, strict=True):
        _assert_close(got, want)
    # B's logits, and on the hybrid its states, do differ at some step (so a leak would have shown in A's)
    pairs = list(zip(b_with_x, b_with_y, strict=False))
    assert any(not _close(x[0], y[0]) for x, y in pairs)
    assert family != "tiny-qwen3.5" or any(not all(map(_close, x[1:], y[1:])) for x, y in pairs)


def test_a_stop_cuts_every_row_off_and_leaves_the_caches_usable():
    sessions = [_session("tiny-qwen2-vl", "inf-mllm", clips, max_new=20) for clips in ([0, 1], [2], [3, 4, 5])]
    stop = []
    for session in sessions:
        session.stop_requested = lambda: bool(stop)
    for row, _piece in answer_together(sessions, "What is on screen?"):
        stop.append(row)
    assert all(s.last_answer.cut_off and 1 <= s.last_answer.answer_tokens < 20 for s in sessions)
    stop.clear()
    for session in sessions:  # each cache holds its closed turn: the next answer works alone and together
        assert "".join(session.ask("Again?")) == session.last_answer.answer and not session.last_answer.cut_off
    list(answer_together(sessions, "Once more?"))
    assert not any(s.last_answer.cut_off for s in sessions)


def test_bad_questions_and_groups_are_refused_before_any_cache_changes():
    sessions = [_session("tiny-qwen2-vl", "inf-mllm", [0]), _session("tiny-qwen2-vl", "inf-mllm", [1])]
    before = [_state(s) for s in sessions]
    with pytest.raises(ValueError, match="fit"):
        answer_together(sessions, ["fine", "word " * 400])
    with pytest.raises(ValueError, match="2 sessions"):
        answer_together(sessions, ["one question"])
    with pytest.raises(ValueError, match="once per batch"):
        AnsweringTogether([sessions[0], sessions[0]])
    assert [_state(s) for s in sessions] == before and all(s.rounds == 0 for s in sessions)
