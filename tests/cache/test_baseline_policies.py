"""Each baseline keeps what its paper says it keeps."""

import numpy as np
import pytest
import torch

from cache.config import CacheConfig
from cache.policies import (
    POLICIES,
    InfMllmSettings,
    PolicySettings,
    SnapKvSettings,
    StreamingLlmSettings,
    settings_for,
    unused_settings,
)
from tests.support.synthetic_cache import KV_HEADS, LAYERS, filled_cache, kept_indices

N, BUDGET, WINDOW = 120, 40, 8


def test_window_keeps_the_most_recent_tokens():
    cache = filled_cache(N, policy="window", budget=BUDGET, window=WINDOW)
    cache.evict(BUDGET)
    assert (kept_indices(cache) == np.arange(N - BUDGET, N)).all()


def test_streaming_llm_keeps_sinks_and_recent_tokens():
    cache = filled_cache(N, policy="streaming-llm", budget=BUDGET, window=WINDOW, sinks=4)
    cache.evict(BUDGET)
    expected = np.concatenate([np.arange(4), np.arange(N - BUDGET + 4, N)])
    assert (kept_indices(cache) == expected).all()


def test_h2o_keeps_heavy_hitters_per_head_plus_recent():
    rng = np.random.default_rng(3)
    accumulated = rng.random((LAYERS, KV_HEADS, N)) * 10
    cache = filled_cache(N, accumulated, policy="h2o", budget=BUDGET, window=WINDOW)
    cache.evict(BUDGET)
    kept = kept_indices(cache)
    for layer in range(LAYERS):
        for head in range(KV_HEADS):
            older = accumulated[layer, head, : N - WINDOW]
            heavy = np.argsort(-older)[: BUDGET - WINDOW]
            expected = np.sort(np.concatenate([heavy, np.arange(N - WINDOW, N)]))
            np.testing.assert_array_equal(kept[layer, head], expected)
    # the kept tokens carry their accumulated scores along, for the next eviction
    torch.testing.assert_close(
        cache.layers[0].attention[0, 0], torch.tensor(accumulated[0, 0, kept[0, 0]], dtype=torch.float32)
    )


def test_full_never_evicts():
    cache = filled_cache(N, policy="full", budget=BUDGET, window=WINDOW)
    stats = cache.evict(BUDGET)
    assert stats.tokens_after == N and cache.get_seq_length() == N


@pytest.mark.parametrize("policy", [name for name, cls in POLICIES.items() if cls.evicts])
def test_eviction_keeps_values_paired_with_their_keys(policy):
    scores = np.random.default_rng(0).random((LAYERS, KV_HEADS, N))
    cache = filled_cache(N, scores, policy=policy, budget=BUDGET, window=WINDOW)
    before = [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]
    cache.evict(BUDGET)
    kept = kept_indices(cache)
    for layer_idx, layer in enumerate(cache.layers):
        keys, values = before[layer_idx]
        for head in range(KV_HEADS):
            idx = torch.as_tensor(kept[layer_idx, head])
            assert torch.equal(layer.values[0, head], values[0, head, idx])
            assert torch.equal(layer.keys[0, head], keys[0, head, idx])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"policy": "lru"}, "allowed: inf-mllm, snapkv, streaming-llm, h2o, window, full"),
        ({"budget": 32, "window": 32}, "must be larger than the window"),
        ({"window": 0}, "window must be >= 1"),
        (
            {"policy": "streaming-llm", "budget": 40, "window": 32, "policy_settings": StreamingLlmSettings(sinks=8)},
            "must be below the budget",
        ),
        ({"policy": "snapkv", "policy_settings": InfMllmSettings()}, "takes SnapKvSettings, got InfMllmSettings"),
        ({"policy": "h2o", "policy_settings": InfMllmSettings()}, "takes PolicySettings, got InfMllmSettings"),
        ({"positions": "absolute"}, "allowed: rerotate, original"),
    ],
)
def test_bad_configuration_names_what_is_allowed(kwargs, message):
    with pytest.raises(ValueError, match=message):
        CacheConfig(**kwargs)


@pytest.mark.parametrize(
    "settings_class, kwargs, message",
    [
        (InfMllmSettings, {"bias": -0.1}, "bias must be >= 0"),
        (InfMllmSettings, {"pool": 0}, "pool must be >= 1"),
        (InfMllmSettings, {"pool_mode": "median"}, "allowed: max, avg, span"),
        (StreamingLlmSettings, {"sinks": -1}, "sinks must be >= 0"),
        (SnapKvSettings, {"kernel": 0}, "kernel must be >= 1"),
    ],
)
def test_bad_policy_settings_name_what_is_allowed(settings_class, kwargs, message):
    with pytest.raises(ValueError, match=message):
        settings_class(**kwargs)


def test_each_policy_gets_its_own_settings_and_ignores_the_others():
    """Loose values (a script's, the command line's) reach the policy they belong to; another policy's are left out."""
    assert CacheConfig().policy_settings == InfMllmSettings()
    assert settings_for("streaming-llm", sinks=2, bias=0.5) == StreamingLlmSettings(sinks=2)
    assert settings_for("inf-mllm", sinks=2, bias=0.5) == InfMllmSettings(bias=0.5)
    assert type(settings_for("h2o", sinks=2)) is PolicySettings
    with pytest.raises(TypeError, match="no policy has the setting"):
        settings_for("inf-mllm", bais=0.5)
    # sinks set away from their default are reported as not applying to inf-mllm; defaults are not
    assert unused_settings("inf-mllm", sinks=2, bias=0.5) == ["sinks"]
    assert unused_settings("inf-mllm", sinks=4) == []
    # a policy without sinks is not bound by them (streaming-llm's default 4 + window 32 would not fit in 34)
    CacheConfig(budget=34, window=32)
    with pytest.raises(ValueError, match="must be below the budget"):
        CacheConfig(policy="streaming-llm", budget=34, window=32)
