"""A long stream under every bounded policy: budget respected, metrics sane, memory flat."""

import numpy as np
import pytest
import torch

from cache.config import CacheConfig
from model.session import SessionConfig, StreamingSession
from tests.support.model_fixtures import random_frames
from tests.support.policy_behaviours import EVICTING
from tests.support.session_helpers import TINY_FAMILIES, loaded

# 60 clips of 4 s: the cache is full from about the 10th, so the last 50 each evict and 13 of the 18 answers are
# asked on a full cache (100 clips showed nothing more, at twice the time)
CLIPS, QUESTIONS, BUDGET, MAX_NEW = 60, 18, 512, 8


@pytest.mark.parametrize("policy", EVICTING)
@pytest.mark.parametrize("family", TINY_FAMILIES)
def test_long_stream_stays_within_budget(family, policy):
    session = StreamingSession(
        loaded(family), CacheConfig(policy=policy, budget=BUDGET, window=16), SessionConfig(max_new_tokens=MAX_NEW)
    )
    clips, answers = [], []
    for i in range(CLIPS):
        clips.append(session.ingest_clip(random_frames(4, seed=i), 4.0 * i, 4.0 * (i + 1)))
        assert session.cache.get_seq_length() <= BUDGET
        if i % 3 == 2 and len(answers) < QUESTIONS:
            pieces = list(session.ask(f"What happened in clip {i}?"))
            answers.append(session.last_answer)
            assert "".join(pieces) == answers[-1].answer
    assert len(answers) == QUESTIONS
    assert all(c.cache_tokens <= BUDGET and c.visual_tokens > 0 for c in clips)
    for a in answers:
        assert a.cache_tokens_after <= BUDGET - MAX_NEW  # headroom kept for the answer
        assert a.cache_tokens_end <= BUDGET
        assert a.cache_tokens_before >= a.cache_tokens_after
        assert 0 <= a.answer_tokens <= MAX_NEW and a.ttft_s > 0 and a.decode_tokens_per_s >= 0
        assert a.evict_ms >= 0 and a.process_rss_bytes > 0 and a.device_mem_bytes is None  # CPU
    assert all(a.cache_tokens_before > a.cache_tokens_after for a in answers[5:])  # full cache: evicts
    kv = np.array([a.kv_bytes for a in answers[4:]])
    assert kv.max() <= kv.min() * 1.05  # flat from round 5 on (the cache holds ~budget tokens)
    assert session.cache.evictions > CLIPS // 2


def test_full_policy_grows_instead():
    session = StreamingSession(loaded("tiny-qwen2-vl"), CacheConfig(policy="full", budget=BUDGET, window=16))
    sizes = [session.ingest_clip(random_frames(4, seed=i), 4.0 * i, 4.0 * i + 4).cache_tokens for i in range(30)]
    assert sizes[-1] > BUDGET and sizes == sorted(sizes)


def test_kv_bytes_read_during_a_first_forward_counts_what_is_there():
    """Admission reads `kv_bytes` from another thread while a new stream runs its first forward: a layer is then
    initialized (`lazy_initialization`) before it holds any keys. Such a read counts that layer as empty."""
    session = StreamingSession(loaded("tiny-qwen2-vl"), CacheConfig(policy="inf-mllm", budget=BUDGET, window=16))
    cache = session.cache
    assert cache.kv_bytes() == 0
    states = torch.zeros(1, 2, 3, 16)
    cache.kv_layers[0].lazy_initialization(states, states)  # the moment the first forward reaches layer 0
    assert cache.kv_layers[0].is_initialized and cache.kv_bytes() == 0
    session.ingest_clip(random_frames(4, seed=0), 0.0, 4.0)
    first = cache.kv_layers[0]
    assert cache.kv_bytes() == 2 * first.keys.numel() * first.keys.element_size() * len(cache.kv_layers) > 0
