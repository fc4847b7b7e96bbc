"""Inf-MLLM's selection with pool=1 (Algorithm 1 as published) against an independent numpy reference."""

import numpy as np
import pytest

from tests.support.synthetic_cache import KV_HEADS, LAYERS, filled_cache, kept_indices


def reference_keep(scores: np.ndarray, n: int, window: int, bias: float, budget: int) -> np.ndarray:
    """Algorithm 1 for one head: top-r older tokens by S + D, plus the `window` recent ones."""
    older = n - window
    s = scores[:older]
    d = -np.arange(older - 1, -1, -1) * bias / older  # -[n-l-1, ..., 1, 0] * b / (n-l)
    r = budget - window
    top = np.argsort(-(s + d), kind="stable")[:r]
    return np.sort(np.concatenate([top, np.arange(older, n)]))


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("bias", [0.0, 1e-3, 0.05])
def test_keeps_exactly_what_algorithm_1_keeps(seed, bias):
    rng = np.random.default_rng(seed)
    n, window, budget = 300, 16, 100
    scores = rng.dirichlet(np.ones(n), size=(LAYERS, KV_HEADS))  # rows of attention that sum to 1
    cache = filled_cache(n, scores, policy="inf-mllm", budget=budget, window=window, bias=bias, pool=1)
    stats = cache.evict(budget)
    assert (stats.tokens_before, stats.tokens_after) == (n, budget)
    kept = kept_indices(cache)
    for layer in range(LAYERS):
        for head in range(KV_HEADS):
            expected = reference_keep(scores[layer, head], n, window, bias, budget)
            np.testing.assert_array_equal(kept[layer, head], expected)


def test_larger_bias_keeps_newer_tokens():
    rng = np.random.default_rng(7)
    n, window, budget = 400, 16, 80
    scores = rng.dirichlet(np.ones(n), size=(LAYERS, KV_HEADS))
    mean_kept = []
    for bias in [0.0, 1e-3, 1e-2, 1.0, 100.0]:
        cache = filled_cache(n, scores, policy="inf-mllm", budget=budget, window=window, bias=bias, pool=1)
        cache.evict(budget)
        older_kept = kept_indices(cache)[..., : budget - window]
        mean_kept.append(older_kept.mean())
    assert mean_kept == sorted(mean_kept) and mean_kept[0] < mean_kept[-1]
    # a bias far above any attention score degenerates to window attention: the newest tokens only
    assert older_kept.min() == n - budget


def test_heads_choose_independently():
    n, window, budget = 50, 4, 20
    scores = np.zeros((LAYERS, KV_HEADS, n))
    scores[:, 0, :10] = 1.0  # head 0 looks at the start
    scores[:, 1, 20:30] = 1.0  # head 1 looks at the middle
    cache = filled_cache(n, scores, policy="inf-mllm", budget=budget, window=window, bias=0.0, pool=1)
    cache.evict(budget)
    kept = kept_indices(cache)
    assert set(range(10)) <= set(kept[0, 0]) and not set(range(20, 30)) & set(kept[0, 0][:16])
    assert set(range(20, 30)) <= set(kept[0, 1])
