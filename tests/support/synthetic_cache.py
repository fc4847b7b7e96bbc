"""A BoundedCache filled with made-up keys and scores, to test selection without running a model."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from cache.bounded_cache import BoundedCache
from cache.config import CacheConfig
from cache.policies import settings_for
from tests.support.tiny_text_models import llama_config

LAYERS, KV_HEADS, HEAD_DIM = 3, 2, 16


def filled_cache(n: int, attention: np.ndarray | None = None, **config) -> BoundedCache:
    """`n` tokens in every layer at original positions 0..n-1; key[..., 0] holds the token index.

    attention: [L, H_kv, n] scores to install (what a recording would have left), or None.
    config: CacheConfig's fields and the policy's own settings (bias=, pool=, sinks=: `settings_for`).
    """
    config.setdefault("positions", "original")
    cache_fields = {f.name for f in dataclasses.fields(CacheConfig)}
    settings = {name: config.pop(name) for name in list(config) if name not in cache_fields}
    if settings:
        config["policy_settings"] = settings_for(config.get("policy", CacheConfig.policy), **settings)
    cache = BoundedCache(llama_config(layers=LAYERS, kv_heads=KV_HEADS), CacheConfig(**config))
    cache.stage_positions(torch.arange(n)[None])
    index = torch.arange(n, dtype=torch.float32)
    for layer_idx, layer in enumerate(cache.layers):
        keys = torch.randn(1, KV_HEADS, n, HEAD_DIM)
        keys[..., 0] = index
        cache.update(keys, torch.randn(1, KV_HEADS, n, HEAD_DIM), layer_idx)
        if attention is not None:
            layer.attention = torch.as_tensor(attention[layer_idx], dtype=torch.float32)[None].clone()
    return cache


def kept_indices(cache: BoundedCache) -> np.ndarray:
    """[L, H_kv, K] original indices of the tokens each layer and head still holds."""
    return np.stack([layer.keys[0, :, :, 0].round().long().numpy() for layer in cache.layers])
