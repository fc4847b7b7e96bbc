"""The bounded KV cache: transformers' DynamicCache whose layers can be cut down to a kept subset.

Each layer stores, next to its keys and values, every cached token's position and the attention it
received (what the policies score). Eviction is "keep these indices", decided by one top-k over all
layers and heads and applied to every layer.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from transformers import DynamicCache, PreTrainedConfig
from transformers.cache_utils import DynamicLayer

from cache.attention import ACTIVE_OBSERVER, attention_probs
from cache.config import CacheConfig
from cache.policies import POLICIES, select_keep
from cache.positions import compact_positions
from cache.rope import KeyRotator

logger = logging.getLogger(__name__)

_ROW_BLOCK = 256  # query rows per block when accumulating attention (bounds the [rows, N] temporary)


class BoundedLayer(DynamicLayer):
    """A DynamicLayer that also keeps each token's positions and received attention.

    keys/values: [B, H_kv, N, D]; positions: [B, H_kv, N, P] int64; attention: [B, H_kv, N] float32.
    """

    def __init__(self) -> None:
        super().__init__()
        self.positions: torch.Tensor | None = None
        self.attention: torch.Tensor | None = None
        self.staged_positions: torch.Tensor | None = None  # [B, 1, T, P] of the tokens being added

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if self.staged_positions is None:
            raise RuntimeError("positions of the new tokens were not staged (BoundedCache.stage_positions)")
        keys, values = super().update(key_states, value_states)
        batch, heads, new = key_states.shape[:3]
        pos = self.staged_positions.expand(batch, heads, new, -1)
        if pos.shape[2] != new:
            raise RuntimeError(f"staged positions for {pos.shape[2]} tokens, model added {new}")
        fresh = torch.zeros(batch, heads, new, dtype=torch.float32, device=key_states.device)
        self.positions = pos if self.positions is None else torch.cat([self.positions, pos], dim=2)
        self.attention = fresh if self.attention is None else torch.cat([self.attention, fresh], dim=2)
        return keys, values

    def keep(self, index: torch.Tensor) -> None:
        """Keeps the tokens at `index` ([B, H_kv, K], ascending) in every per-token tensor."""
        self.keys = _gather_tokens(self.keys, index)
        self.values = _gather_tokens(self.values, index)
        self.positions = _gather_tokens(self.positions, index)
        self.attention = self.attention.gather(2, index)

    def reset(self) -> None:
        super().reset()
        self.positions = self.attention = self.staged_positions = None


def _gather_tokens(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    # x: [B, H, N, D], index: [B, H, K] -> [B, H, K, D] (advanced indexing: faster than gather on CPU)
    batch, heads = index.shape[:2]
    rows = torch.arange(batch, device=x.device)[:, None, None]
    cols = torch.arange(heads, device=x.device)[None, :, None]
    return x[rows, cols, index]


@dataclass
class EvictionStats:
    tokens_before: int
    tokens_after: int
    evict_ms: float


class BoundedCache(DynamicCache):
    """A KV cache that holds at most `config.budget` tokens per layer after every eviction point.

    Who drives it (see `cache.runner.CachedRunner`): stage the positions of the tokens of each forward,
    record attention while a prompt is prefilled if the policy asks for it, and call `evict(target)`.
    """

    def __init__(self, model_config: PreTrainedConfig, config: CacheConfig, rotator: KeyRotator | None = None) -> None:
        super().__init__(config=model_config)
        if any(getattr(layer, "is_sliding", False) for layer in self.layers):
            raise ValueError("models with sliding-window attention layers are not supported by the bounded cache")
        self.layers = [BoundedLayer() for _ in self.layers]
        self.config = config
        self.policy = POLICIES[config.policy](config)
        if config.positions == "rerotate" and self.policy.evicts and rotator is None:
            raise ValueError("positions='rerotate' needs a KeyRotator (KeyRotator.from_model(model))")
        self.rotator = rotator
        self.next_position = 0  # first free position for the next token (highest component + 1)
        self._recording: str | None = None
        self.evictions = 0

    @classmethod
    def for_model(cls, model: torch.nn.Module, config: CacheConfig) -> BoundedCache:
        """A cache for `model` (its re-rotation frequencies are read from the model when needed)."""
        needs_rotator = config.positions == "rerotate" and POLICIES[config.policy].evicts
        return cls(model.config, config, KeyRotator.from_model(model) if needs_rotator else None)

    def fork(self, config: CacheConfig, rotator: KeyRotator | None = None) -> BoundedCache:
        """A copy of every cached token (keys, values, positions, recorded attention) under another config.

        Lets one prefill serve several policies: prefill a long prompt once into a cache that does not
        evict, then fork it per policy and prefill the rest of the prompt into each fork.
        """
        rotator = rotator or self.rotator
        if config.positions == "rerotate" and POLICIES[config.policy].evicts and rotator is None:
            raise ValueError("positions='rerotate' needs a KeyRotator (KeyRotator.from_model(model))")
        twin = copy.deepcopy(self)
        twin.config = config
        twin.policy = POLICIES[config.policy](config)
        twin.rotator = rotator
        return twin

    # -- bookkeeping ------------------------------------------------------------------------------

    def stage_positions(self, position_ids: torch.Tensor, device: torch.device | str | None = None) -> None:
        """Positions of the tokens the next forward adds: [B, T] (RoPE) or [P, B, T] (M-RoPE).

        Pass them on the CPU (and the cache's `device`): the next free position is then read without
        waiting for the accelerator, and the positions are copied to the device once, not once per layer.
        """
        pos = position_ids if position_ids.dim() == 3 else position_ids[None]
        self.next_position = max(self.next_position, int(pos.max()) + 1)
        staged = pos.permute(1, 2, 0)[:, None].long().to(device or pos.device)  # [B, 1, T, P]
        for layer in self.layers:
            layer.staged_positions = staged

    def kv_bytes(self) -> int:
        """Bytes held by keys and values over all layers."""
        return sum(
            layer.keys.numel() * layer.keys.element_size() + layer.values.numel() * layer.values.element_size()
            for layer in self.layers
            if layer.is_initialized
        )

    def max_position(self) -> int:
        """Highest position component of any cached token (-1 when empty)."""
        return max((int(layer.positions.max()) for layer in self.layers if layer.positions is not None), default=-1)

    def reset(self) -> None:
        super().reset()
        self.next_position = 0
        self.evictions = 0

    # -- attention recording ----------------------------------------------------------------------

    @contextmanager
    def recording(self, mode: str | None) -> Iterator[None]:
        """While active, the `bounded_sdpa` attention reports to this cache. mode: None, "window", "accumulate"."""
        if mode is None:
            yield
            return
        self._recording = mode
        token = ACTIVE_OBSERVER.set(self)
        try:
            yield
        finally:
            ACTIVE_OBSERVER.reset(token)
            self._recording = None

    def observe(
        self,
        layer_idx: int,
        query: torch.Tensor,  # [B, H_q, T, D]
        key: torch.Tensor,  # [B, H_kv, N, D]
        scaling: float,
    ) -> None:
        """Scores the cached tokens of one layer from this forward's attention (see `recording`)."""
        layer = self.layers[layer_idx]
        rows = query.shape[2]
        if self._recording == "window":
            start = max(rows - self.config.window, 0)
            probs = self._probs(query, key, start, rows, scaling)
            layer.attention = probs.mean(dim=2)
        elif self._recording == "accumulate":
            for start in range(0, rows, _ROW_BLOCK):
                stop = min(start + _ROW_BLOCK, rows)
                layer.attention += self._probs(query, key, start, stop, scaling).sum(dim=2)

    def _probs(self, query, key, start: int, stop: int, scaling: float) -> torch.Tensor:
        """Attention of query rows [start, stop) averaged over each KV group's query heads: [B, H_kv, R, N]."""
        probs = attention_probs(query[:, :, start:stop], key, query.shape[2], start, scaling)  # [B, H_q, R, N]
        batch, q_heads, r, n = probs.shape
        kv_heads = key.shape[1]
        return probs.view(batch, kv_heads, q_heads // kv_heads, r, n).mean(dim=2)

    # -- eviction ---------------------------------------------------------------------------------

    def evict(self, target: int) -> EvictionStats:
        """Cuts every layer down to `target` tokens by the policy (no-op when already within it)."""
        before = self.get_seq_length()
        if not self.policy.evicts or before <= target:
            return EvictionStats(before, before, 0.0)
        if target < self.config.window:
            raise ValueError(f"eviction target {target} is below the window ({self.config.window})")
        started = time.perf_counter()
        first = self.layers[0].keys
        shape = (len(self.layers), first.shape[0], first.shape[1])
        attention = torch.stack([layer.attention for layer in self.layers]) if self.policy.capture is not None else None
        keep = select_keep(self.policy, before, target, attention, shape)  # [L, B, H_kv, K]
        keep = keep.to(first.device)
        for layer, index in zip(self.layers, keep, strict=True):
            layer.keep(index)
        if self.config.positions == "rerotate":
            self._compact()
        self.evictions += 1
        elapsed_ms = (time.perf_counter() - started) * 1000.0
        return EvictionStats(before, self.get_seq_length(), elapsed_ms)

    def _compact(self) -> None:
        """Moves the kept tokens to compact positions and re-rotates their keys to match."""
        positions = torch.stack([layer.positions for layer in self.layers])  # [L, B, H_kv, K, P]
        compacted, shift = compact_positions(positions)
        for layer, new_pos, delta in zip(self.layers, compacted, shift, strict=True):
            layer.keys = self.rotator.rotate(layer.keys, delta)
            layer.positions = new_pos
        self.next_position = int(compacted.max()) + 1
