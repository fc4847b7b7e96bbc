"""Every registered policy, on a cache of made-up keys and attention (no model): what the shared selection does
with its scores holds for all of them. The suites that run whole models take one policy per behaviour
(tests/support/policy_behaviours.py); this file is where every policy, a new one included, meets the cache."""

import numpy as np
import pytest

from cache.policies import POLICIES
from tests.support.policy_behaviours import BEHAVIOURS, EVICTING, one_policy_per_behaviour
from tests.support.synthetic_cache import KV_HEADS, LAYERS, filled_cache, kept_indices

N, BUDGET, WINDOW = 120, 40, 8


@pytest.mark.parametrize("policy", list(POLICIES))
def test_every_policy_keeps_the_budget_the_window_and_stream_order(policy):
    attention = np.random.default_rng(1).random((LAYERS, KV_HEADS, N))
    cache = filled_cache(N, attention, policy=policy, budget=BUDGET, window=WINDOW)
    stats = cache.evict(BUDGET)
    evicts = POLICIES[policy].evicts
    assert cache.get_seq_length() == stats.tokens_after == (BUDGET if evicts else N)
    kept = kept_indices(cache)  # [L, H_kv, K] original indices
    for layer in range(LAYERS):
        for head in range(KV_HEADS):
            row = kept[layer, head]
            assert (np.diff(row) > 0).all(), "kept tokens stay in stream order, each once"
            assert set(range(N - WINDOW, N)) <= set(row.tolist()), "the recent window is always kept"
        if not POLICIES[policy].per_head:
            assert (kept[layer] == kept[layer, :1]).all(), "a policy that is not per head keeps one set for all heads"


@pytest.mark.parametrize("policy", [name for name, cls in POLICIES.items() if cls.capture is not None])
def test_a_policy_that_reads_attention_keeps_a_different_set_when_the_attention_differs(policy):
    """The captured attention reaches the policy's scores: two attention patterns, two different choices."""
    kept = []
    for seed in (1, 2):
        attention = np.random.default_rng(seed).random((LAYERS, KV_HEADS, N))
        cache = filled_cache(N, attention, policy=policy, budget=BUDGET, window=WINDOW)
        cache.evict(BUDGET)
        kept.append(kept_indices(cache))
    assert not np.array_equal(kept[0], kept[1])


def test_the_heavy_suites_cover_every_behaviour_once():
    behaviours = {cls.behaviour() for cls in POLICIES.values()}
    assert {POLICIES[name].behaviour() for name in BEHAVIOURS} == behaviours and len(BEHAVIOURS) == len(behaviours)
    assert EVICTING == [name for name in BEHAVIOURS if POLICIES[name].evicts]
    assert one_policy_per_behaviour()[0] == "inf-mllm"  # the default policy is the one the heavy suites run first
