"""Answers cite the moments they drew on: recalled clips (tier 2) and the resident clips the question attended to
most, as stream-time spans of clips really ingested."""

import pytest
import torch

from cache.config import CacheConfig
from model.evidence import ClipIndex, attended, recalled
from model.session import SessionConfig, StreamingSession
from tests.model_fixtures import random_frames
from tests.session_helpers import loaded


def test_token_ranks_map_to_their_clips_and_text_turns_to_none():
    index = ClipIndex(max_clips=3)
    for k, (first, last) in enumerate([(0, 10), (12, 20), (25, 30), (30, 40)]):  # 10-12, 20-25: text turns
        index.add(first, last, 4.0 * k, 4.0 * k + 4)
    totals = index.clips_of(torch.tensor([5, 11, 12, 19, 22, 29, 30, 39]), torch.ones(8))
    assert totals == {(4.0, 8.0): 2.0, (8.0, 12.0): 1.0, (12.0, 16.0): 2.0}  # the first clip was forgotten (3 max)
    assert [e.start for e in recalled(index, [(14, 18), (26, 28)])] == [4.0, 8.0]


class _Layer:
    def __init__(self, index, attention):
        self.token_index = torch.tensor([[index]])
        self.attention = torch.tensor([[attention]], dtype=torch.float32)


def test_the_most_attended_clips_come_first_with_their_share():
    index = ClipIndex()
    index.add(0, 4, 0.0, 4.0)
    index.add(4, 8, 4.0, 8.0)
    index.add(8, 12, 8.0, 12.0)
    layers = [_Layer([0, 1, 5, 9, 12], [0.1, 0.1, 0.5, 0.2, 0.1]), _Layer([0, 5, 9, 12], [0.0, 0.3, 0.1, 0.6])]
    cited = attended(index, layers, top=2)
    assert [(e.start, e.source) for e in cited] == [(4.0, "attention"), (8.0, "attention")]
    assert cited[0].score == pytest.approx(0.8 / 2.0)  # of all the question's attention, its own tokens included
    assert attended(index, [_Layer([0, 5], [0.0, 0.0])]) == []  # a policy that records no attention


def _session(policy: str) -> tuple[StreamingSession, list[tuple[float, float]]]:
    session = StreamingSession(
        loaded("tiny-qwen2-vl"),
        CacheConfig(policy=policy, budget=160, window=8, recall=48, block=16),
        SessionConfig(max_new_tokens=6),
    )
    spans = []
    for k in range(10):
        session.ingest_clip(random_frames(2, seed=k), 4.0 * k, 4.0 * k + 4)
        spans.append((4.0 * k, 4.0 * k + 4))
    "".join(session.ask("What happened at the start?"))
    return session, spans


@pytest.mark.parametrize("policy", ["inf-mllm", "window"])
def test_an_answer_cites_clips_it_recalled_and_attended(policy):
    session, spans = _session(policy)
    answer = session.last_answer
    recall = [e for e in answer.evidence if e.source == "recall"]
    attention = [e for e in answer.evidence if e.source == "attention"]
    assert answer.recalled_tokens > 0 and recall  # over the budget: recall brought old clips back
    assert all((e.start, e.end) in spans for e in answer.evidence)  # only clips really ingested
    assert sum(e.score for e in recall) <= answer.recalled_tokens
    resident = {session.clip_index.clips_of(torch.tensor([int(t)]), torch.ones(1)).popitem()[0]
                for t in session.cache.layers[0].token_index[0, 0].tolist()
                if session.clip_index.clips_of(torch.tensor([int(t)]), torch.ones(1))}  # fmt: skip
    if policy == "inf-mllm":  # records the question's attention: cites resident clips
        assert attention and all((e.start, e.end) in resident for e in attention)
    else:  # window records none
        assert not attention
