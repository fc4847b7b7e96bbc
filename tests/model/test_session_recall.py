"""Recall on the VLM path (tiny random models of the real architectures): a question brings back tokens of
an early clip, visual ones included, in stream order at consistent (M-RoPE) positions, within budget +
recall; the next clip cuts the cache back to its budget. Random weights show the path, not quality."""

import pytest
import torch

from cache.config import CacheConfig
from model.session import SessionConfig, StreamingSession
from tests.support.model_fixtures import random_frames
from tests.support.session_helpers import TINY_FAMILIES, loaded

BUDGET, RECALL, MAX_NEW, CLIPS = 160, 256, 6, 12


@pytest.mark.parametrize("positions", ["rerotate", "original"])
@pytest.mark.parametrize("family", TINY_FAMILIES)
def test_a_question_recalls_the_first_clip_within_budget_plus_recall(family, positions):
    # window attention keeps only the newest tokens: clip 1 is surely evicted before the question
    config = CacheConfig(
        policy="window", budget=BUDGET, window=8, recall=RECALL, block=16, store_bytes=2**26, positions=positions
    )
    session = StreamingSession(loaded(family), config, SessionConfig(max_new_tokens=MAX_NEW))
    session.ingest_clip(random_frames(4, seed=0), 0.0, 4.0)
    first_clip_end = session.cache.tokens_seen  # tokens [0, first_clip_end): the prompt start and clip 1
    for i in range(1, CLIPS):
        session.ingest_clip(random_frames(4, seed=i), 4.0 * i, 4.0 * (i + 1))
    cache = session.cache
    resident = cache.kv_layers[0].token_index[0]
    assert not (resident < first_clip_end).any()  # all of clip 1 was evicted

    seen = {}
    pieces = session.ask("What happened at the start?")
    next(pieces)  # the question is prefilled with what recall brought back; decoding has begun
    seen["length"] = cache.get_seq_length()
    seen["pinned"] = cache.pinned.clone()
    seen["next_position"] = cache.next_position
    seen["layers"] = [(layer.token_index.clone(), layer.positions.clone()) for layer in cache.kv_layers]
    list(pieces)
    answer = session.last_answer

    assert answer.recalled_tokens > 0 and answer.recall_ms > 0 and answer.store_tokens > 0
    assert seen["length"] <= BUDGET + RECALL
    recalled = seen["pinned"]
    assert (recalled < first_clip_end).any()  # the early clip came back
    for token_index, pos in seen["layers"]:
        order = token_index[0]
        assert (order.diff(dim=-1) > 0).all()  # stream order, no duplicates, every head
        assert torch.isin(recalled, order[0]).all()  # every head holds every recalled token
        if positions == "rerotate":  # compact: positions follow stream order and stay below the next one
            assert (pos[0, :, :, 0].diff(dim=-1) >= 0).all()
        assert int(pos[..., 0].max()) < seen["next_position"]
    if family == "tiny-qwen2-vl":  # M-RoPE: a visual token's height/width components differ from its time one
        origin = cache.kv_layers[0].origin[0, 0]
        index = cache.kv_layers[0].token_index[0, 0]
        early = origin[(index < first_clip_end) & torch.isin(index, recalled)]
        assert (early[:, 1] != early[:, 0]).any()  # visual tokens of clip 1 among the recalled
    session.ingest_clip(random_frames(4, seed=99), 4.0 * CLIPS, 4.0 * (CLIPS + 1))
    assert cache.get_seq_length() <= BUDGET and cache.pinned is None  # back to the budget after the answer
