"""`snapkv` (Li et al. 2024): observation-window attention, pooled, top-k per KV head, plus the window.

The score of each older token is the attention the prompt's last `window` query rows give it (averaged
over the rows and over the query heads of its KV group), average-pooled over 7 neighbouring tokens
(SnapKV's clustering kernel, fixed: `CacheConfig.pool` tunes inf-mllm, not this policy). No attention bias.
"""

import dataclasses

import torch

from cache.config import CacheConfig
from cache.policies.base import EvictionPolicy

SNAPKV_POOL = 7


class SnapKV(EvictionPolicy):
    name = "snapkv"
    capture = "window"
    per_head = True

    def __init__(self, config: CacheConfig) -> None:
        super().__init__(dataclasses.replace(config, pool=SNAPKV_POOL, pool_mode="avg"))

    def score(self, n: int, attention: torch.Tensor | None, device: torch.device) -> torch.Tensor:
        if attention is None:
            raise RuntimeError("snapkv needs window attention scores; none were captured")
        return self._protect_recent(self._pool_older(attention.float(), n), n)
