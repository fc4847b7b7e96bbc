"""Span pooling of scores (InfMllmSettings.pool) and the snapkv policy, against independent numpy references."""

import numpy as np
import pytest
import torch

from cache.policies import InfMllmSettings
from cache.policies.base import pool_tokens
from tests.support.synthetic_cache import KV_HEADS, LAYERS, filled_cache, kept_indices


def reference_pool(x: np.ndarray, kernel: int, mode: str) -> np.ndarray:
    n = len(x)
    out = np.empty(n)
    for i in range(n):
        if mode == "span":
            lo, hi = i - kernel + 1, i + 1
        else:
            left = (kernel - 1) // 2
            lo, hi = i - left, i - left + kernel
        window = x[max(lo, 0) : min(hi, n)]
        out[i] = window.max() if mode in ("max", "span") else window.mean()
    return out


@pytest.mark.parametrize("mode", ["max", "avg", "span"])
@pytest.mark.parametrize("kernel", [1, 2, 5, 8])
def test_pool_tokens_matches_a_direct_loop(mode, kernel):
    x = np.random.default_rng(kernel).random((2, 3, 40))
    got = pool_tokens(torch.tensor(x, dtype=torch.float32), kernel, mode).numpy()
    for index in np.ndindex(2, 3):
        np.testing.assert_allclose(got[index], reference_pool(x[index], kernel, mode), rtol=1e-6)


def one_attended_token(n: int, at: int) -> np.ndarray:
    scores = np.full((LAYERS, KV_HEADS, n), 1e-4) + np.linspace(0, 1e-5, n)  # a faint, tie-free floor
    scores[..., at] = 1.0
    return scores


@pytest.mark.parametrize(
    ("pool", "mode", "expected"),
    [(1, "max", [50]), (7, "max", range(47, 54)), (8, "span", range(50, 58)), (5, "avg", range(48, 53))],
)
def test_pooling_keeps_the_span_around_an_attended_token(pool, mode, expected):
    n, window = 200, 16
    budget = window + len(expected)
    cache = filled_cache(
        n,
        one_attended_token(n, 50),
        policy="inf-mllm",
        budget=budget,
        window=window,
        bias=0.0,
        pool=pool,
        pool_mode=mode,
        sinks=0,
    )
    cache.evict(budget)
    kept = kept_indices(cache)
    assert (kept[..., : len(expected)] == np.array(list(expected))).all()
    assert (kept[..., len(expected) :] == np.arange(n - window, n)).all()


def test_pooling_never_moves_the_recent_window():
    n, window, budget = 120, 16, 40
    scores = one_attended_token(n, n - window - 1)  # right before the window: pooling must not spill into it
    cache = filled_cache(n, scores, policy="inf-mllm", budget=budget, window=window, pool=9, pool_mode="max")
    cache.evict(budget)
    assert (kept_indices(cache)[..., -window:] == np.arange(n - window, n)).all()


@pytest.mark.parametrize("seed", range(3))
def test_snapkv_keeps_the_top_avg_pooled_window_attention_per_head(seed):
    rng = np.random.default_rng(seed)
    n, window, budget = 150, 8, 50
    scores = rng.dirichlet(np.ones(n), size=(LAYERS, KV_HEADS))
    cache = filled_cache(n, scores, policy="snapkv", budget=budget, window=window)
    cache.evict(budget)
    kept = kept_indices(cache)
    for layer in range(LAYERS):
        for head in range(KV_HEADS):
            pooled = reference_pool(scores[layer, head, : n - window], 7, "avg")
            top = np.argsort(-pooled, kind="stable")[: budget - window]
            expected = np.sort(np.concatenate([top, np.arange(n - window, n)]))
            np.testing.assert_array_equal(kept[layer, head], expected)


@pytest.mark.parametrize(("field", "value"), [("pool", 0), ("pool_mode", "median")])
def test_bad_pooling_settings_are_rejected(field, value):
    with pytest.raises(ValueError, match=field):
        InfMllmSettings(**{field: value})
