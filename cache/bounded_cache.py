"""The bounded KV cache: transformers' DynamicCache whose layers can be cut down to a kept subset.

Each attention layer stores, next to its keys and values, every cached token's position and the attention it
received (what the policies score). Eviction is "keep these indices", decided by one top-k over all
attention layers and heads and applied to every attention layer.

Hybrid models (Qwen3.5: `layer_types` with "linear_attention" layers) keep transformers' own
`LinearAttentionLayer` for those layers: a fixed-size recurrent state and convolution state per layer, which the
model updates in place at every forward. Eviction, budget, positions, re-rotation, recording and the host store
act on the attention layers only (`kv_layers`); the states carry everything the linear layers have seen across
clips and prefill chunks unchanged, and `save_states` / `restore_states` put them back after a probe.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import DynamicCache, PreTrainedConfig
from transformers.cache_utils import CacheLayerMixin, LinearAttentionCacheLayerMixin

from cache.attention import ACTIVE_OBSERVER, attention_probs
from cache.config import CacheConfig
from cache.layer import BoundedLayer
from cache.policies import POLICIES, TokenView, newest_of_each_region, select_keep
from cache.positions import compact_positions
from cache.rope import KeyRotator
from cache.static_layer import StaticBoundedLayer
from cache.store.host_store import HostStore, default_store_bytes
from cache.visual_ids import VisualIds

logger = logging.getLogger(__name__)

_ROW_BLOCK = 256  # query rows per block when accumulating attention (bounds the [rows, N] temporary)


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
        if any(isinstance(layer, CacheLayerMixin) == is_state_layer(layer) for layer in self.layers):
            raise ValueError("layers that are neither attention nor linear attention alone are not supported")
        self.config = config
        self.policy = POLICIES[config.policy](config.policy_settings)
        self.layers = [layer if is_state_layer(layer) else self._new_layer() for layer in self.layers]
        # the attention layers (model layer indices kv_layer_ids): what eviction, positions and the store act on
        self.kv_layer_ids = [i for i, layer in enumerate(self.layers) if not is_state_layer(layer)]
        self.kv_layers: list[BoundedLayer] = [self.layers[i] for i in self.kv_layer_ids]
        if not self.kv_layers:
            raise ValueError("the bounded cache needs at least one attention layer")
        if config.positions == "rerotate" and self.policy.evicts and rotator is None:
            raise ValueError("positions='rerotate' needs a KeyRotator (KeyRotator.from_model(model))")
        self.rotator = rotator
        self.next_position = 0  # first free position for the next token (highest component + 1)
        self.position_offset = 0  # positions closed by compaction so far: origin = position + offset at staging
        self.tokens_seen = 0  # tokens ever added: the next token's token_index
        self.visual_ids = VisualIds()  # (frame, region) of visual tokens by token_index, as the model told it
        self._recording: str | None = None
        self._queries: dict[int, torch.Tensor] | None = None  # layer -> [H_q, R, D] while capturing queries
        self.evictions = 0
        self.store = self._make_store(config, rotator)
        self.archived = 0  # tokens [0, archived) of the stream are in the store
        self.pinned: torch.Tensor | None = None  # token indices no eviction may remove (recalled for an answer)
        self.picture_since = 0  # frames from this id on share the current frame grid (`new_grid`)

    def _new_layer(self) -> BoundedLayer:
        if self.config.storage == "dynamic":
            return BoundedLayer()
        # an evicting cache decodes within budget + recall tokens (+ the token being added): preallocate them
        return StaticBoundedLayer(self.config.budget + self.config.recall + 1 if self.policy.evicts else 0)

    @staticmethod
    def _make_store(config: CacheConfig, rotator: KeyRotator | None) -> HostStore | None:
        if config.recall == 0 or not POLICIES[config.policy].evicts:
            return None
        if rotator is None:
            raise ValueError("recall needs a KeyRotator (KeyRotator.from_model(model))")
        folder = Path(config.store_dir) if config.store_dir else None
        return HostStore(config.store_bytes or default_store_bytes(), config.block, rotator, folder, config.store_quant)

    @classmethod
    def for_model(cls, model: torch.nn.Module, config: CacheConfig) -> BoundedCache:
        """A cache for `model` (its re-rotation frequencies are read from the model when needed)."""
        evicts = POLICIES[config.policy].evicts
        needs_rotator = evicts and (config.positions == "rerotate" or config.recall > 0)
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
        twin.policy = POLICIES[config.policy](config.policy_settings)
        twin.rotator = rotator
        return twin

    # -- bookkeeping ------------------------------------------------------------------------------

    def stage_positions(
        self,
        position_ids: torch.Tensor,
        device: torch.device | str | None = None,
        visual: torch.Tensor | None = None,
    ) -> None:
        """Positions of the tokens the next forward adds: [B, T] (RoPE) or [P, B, T] (M-RoPE).

        Pass them on the CPU (and the cache's `device`): the next free position is then read without
        waiting for the accelerator, and the positions are copied to the device once, not once per layer.
        visual: [T, 2] int64, (frame, region) of each visual token and (-1, -1) of each text token, the ids the
        model gives them (what policies read as `TokenView.frame` and `.region`); None: every token is text.
        """
        pos = position_ids if position_ids.dim() == 3 else position_ids[None]
        if visual is not None:
            if visual.shape != (pos.shape[-1], 2):
                raise ValueError(f"visual ids {tuple(visual.shape)} for {pos.shape[-1]} tokens: expected [T, 2]")
            self.visual_ids.add(self.tokens_seen, visual, device or pos.device)
        self.next_position = max(self.next_position, int(pos.max()) + 1)
        staged = pos.permute(1, 2, 0)[:, None].long().to(device or pos.device)  # [B, 1, T, P]
        new = staged.shape[2]
        index = torch.arange(self.tokens_seen, self.tokens_seen + new, device=staged.device)[None, None]
        self.tokens_seen += new
        origin = staged + self.position_offset
        for layer in self.kv_layers:
            layer.staged_positions = staged
            layer.staged_origin = origin
            layer.staged_index = index

    def count_decoded(self, position: int) -> tuple[int, int]:
        """Bookkeeping of `stage_positions` for one decoded text token at `position` (every component), for a
        caller that writes the token's fields into the layers itself (`cache.batch_decode`).

        Returns (its origin: the position it would have had with nothing evicted, its token index)."""
        self.next_position = max(self.next_position, position + 1)
        index = self.tokens_seen
        self.tokens_seen += 1
        return position + self.position_offset, index

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """Tokens held by attention layer `layer_idx`; asked of a linear-attention layer (the default 0 on Qwen3.5),
        those of the first attention layer. Transformers before 5.25 answered so; from 5.25 a linear layer counts
        every token it ever saw, which under eviction is not what the cache holds (masks, headroom, budgets)."""
        if layer_idx < len(self.layers) and is_state_layer(self.layers[layer_idx]):
            layer_idx = self.kv_layer_ids[0]
        return super().get_seq_length(layer_idx)

    def kv_bytes(self) -> int:
        """Bytes held by keys and values over all attention layers. Safe to call from another thread (admission
        does): a layer is initialized before its first keys arrive, and transformers' reset drops the tensors before
        clearing `is_initialized`, so each tensor is read once and a missing one counts 0."""
        return sum(_bytes(layer.keys) + _bytes(layer.values) for layer in self.kv_layers)

    @property
    def state_layers(self) -> list[LinearAttentionCacheLayerMixin]:
        """The linear-attention layers (hybrid models; empty otherwise), holding fixed-size states."""
        return [layer for layer in self.layers if is_state_layer(layer)]

    def state_bytes(self) -> int:
        """Bytes of the linear-attention layers' recurrent and convolution states: fixed per stream, whatever its
        length (0 before the first forward and on models without such layers)."""
        return sum(t.numel() * t.element_size() for t in _state_tensors(self.state_layers))

    def save_states(self) -> list:
        """A copy of every linear-attention layer's states, for `restore_states` (a probe's undo)."""
        return [
            (dict(layer.has_previous_state), _clone(layer.conv_states), _clone(layer.recurrent_states))
            for layer in self.state_layers
        ]

    def restore_states(self, saved: list) -> None:
        """Puts the linear-attention states back as `save_states` found them (in place: their buffers keep their
        addresses, which a compiled decode step may hold)."""
        for layer, (previous, conv, recurrent) in zip(self.state_layers, saved, strict=True):
            for mine, theirs in ((layer.conv_states, conv), (layer.recurrent_states, recurrent)):
                for i, value in theirs.items():
                    if value is None:  # not there before: the flag below makes the layer start afresh again
                        continue
                    if mine[i] is not None and mine[i].shape == value.shape:
                        mine[i].copy_(value)
                    else:
                        mine[i] = value
            layer.has_previous_state = dict(previous)

    def max_position(self) -> int:
        """Highest position component of any cached token (-1 when empty)."""
        return max((int(layer.positions.max()) for layer in self.kv_layers if layer.positions is not None), default=-1)

    def reset(self) -> None:
        super().reset()
        self.next_position = 0
        self.position_offset = 0
        self.tokens_seen = 0
        self.visual_ids.clear()
        self.evictions = 0
        self.archived = 0
        self.pinned = None
        self.picture_since = 0
        if self.store is not None:
            self.store.reset()

    def drop_newest(self, count: int) -> None:
        """Removes the `count` newest tokens of every attention layer (a probe's prompt) and forgets they were
        added. Linear-attention states cannot be cut: save and restore them around the probe (`save_states`)."""
        for layer in self.kv_layers:
            keep = layer.keys.shape[2] - count
            layer.keys, layer.values = layer.keys[:, :, :keep], layer.values[:, :, :keep]
            layer.positions, layer.origin = layer.positions[:, :, :keep], layer.origin[:, :, :keep]
            layer.token_index, layer.attention = layer.token_index[:, :, :keep], layer.attention[:, :, :keep]
        self.tokens_seen -= count
        self.visual_ids.drop_from(self.tokens_seen)

    def pin(self, token_index: torch.Tensor) -> None:
        """No eviction removes these tokens (stream indices, 1-D) until `unpin`."""
        self.pinned = token_index

    def unpin(self) -> None:
        self.pinned = None

    def picture_of(self, frame: torch.Tensor, region: torch.Tensor) -> torch.Tensor | None:
        """[..., n] bool: which of the tokens with these ids ([..., n], -1 for text) are the current picture, the
        newest version of each region (cache/policies/picture.py); None when the cache pins no picture
        (`pin_picture` off, or a policy that never evicts)."""
        if not self.config.pin_picture or not self.policy.evicts:
            return None
        return newest_of_each_region(frame, region, self.picture_since)

    def new_grid(self, first_frame: int) -> None:
        """The frame grid changed (another frame size) from frame id `first_frame` on: the regions of earlier frames
        are history, no longer part of the picture."""
        self.picture_since = first_frame

    def archive_new(self) -> None:
        """Copies the tokens added since the last call (the newest of every layer) to the host store."""
        count = self.tokens_seen - self.archived
        if self.store is None or count <= 0:
            return
        first = self.kv_layers[0]
        if int(first.token_index[0, 0, -count]) != self.archived:
            raise RuntimeError("the tokens to archive are not the newest in the cache")
        keys = [layer.keys[0, :, -count:] for layer in self.kv_layers]
        values = [layer.values[0, :, -count:] for layer in self.kv_layers]
        self.store.archive(keys, values, first.positions[0, 0, -count:], first.origin[0, 0, -count:], self.archived)
        self.archived = self.tokens_seen

    # -- attention recording ----------------------------------------------------------------------

    @contextmanager
    def recording(self, mode: str | None, queries: bool = False) -> Iterator[dict[int, torch.Tensor]]:
        """While active, the `bounded_sdpa` attention reports to this cache. mode: None, "window", "accumulate".
        With `queries`, yields a dict that fills with each layer's last `window` query rows ([H_q, R, D])."""
        captured: dict[int, torch.Tensor] = {}
        if mode is None and not queries:
            yield captured
            return
        self._recording = mode
        self._queries = captured if queries else None
        token = ACTIVE_OBSERVER.set(self)
        try:
            yield captured
        finally:
            ACTIVE_OBSERVER.reset(token)
            self._recording = None
            self._queries = None

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
        if self._queries is not None:
            self._queries[layer_idx] = query[0, :, -self.config.window :].detach()
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
        self.archive_new()
        if not self.policy.evicts or before <= target:
            return EvictionStats(before, before, 0.0)
        if target < self.config.window:
            raise ValueError(f"eviction target {target} is below the window ({self.config.window})")
        started = time.perf_counter()
        view = self.token_view(target)
        pinned = None if self.pinned is None else torch.isin(view.position, self.pinned)
        picture = self.picture_of(view.frame, view.region)
        keep = select_keep(self.policy, view, pinned, picture, self.config.selection == "shared")  # [L, B, H_kv, K]
        keep = keep.to(self.kv_layers[0].keys.device)
        for layer, index in zip(self.kv_layers, keep, strict=True):
            layer.keep(index)
        if self.config.positions == "rerotate":
            self._compact()
        stored_from = self.store.blocks[0].first if self.store is not None and self.store.blocks else self.tokens_seen
        self.visual_ids.retain(torch.stack([layer.token_index for layer in self.kv_layers]), stored_from)
        self.evictions += 1
        elapsed_ms = (time.perf_counter() - started) * 1000.0
        return EvictionStats(before, self.get_seq_length(), elapsed_ms)

    def token_view(self, target: int) -> TokenView:
        """What the policy scores when the cached tokens are cut to `target` (see `TokenView` for the shapes)."""
        layers = self.kv_layers  # L: the attention layers
        position = torch.stack([layer.token_index for layer in layers])  # [L, B, H_kv, n]
        frame, region = self.visual_ids.lookup(position)
        attention = torch.stack([layer.attention for layer in layers]) if self.policy.capture is not None else None
        origin = torch.stack([layer.origin for layer in layers])  # [L, B, H_kv, n, P]
        n = position.shape[-1]
        return TokenView(n, target, self.config.window, attention, position, origin, frame, region, position.device)

    def _compact(self) -> None:
        """Moves the kept tokens to compact positions and re-rotates their keys to match."""
        positions = torch.stack([layer.positions for layer in self.kv_layers])  # [L, B, H_kv, K, P]
        compacted, shift = compact_positions(positions)
        for layer, new_pos, delta in zip(self.kv_layers, compacted, shift, strict=True):
            layer.keys = self.rotator.rotate(layer.keys, delta)
            layer.positions = new_pos
        next_position = int(compacted.max()) + 1
        self.position_offset += self.next_position - next_position
        self.next_position = next_position


def is_state_layer(layer: object) -> bool:
    """Whether a cache layer holds linear-attention states (recurrent + convolution) rather than keys and values."""
    return isinstance(layer, LinearAttentionCacheLayerMixin)


def _clone(states: dict[int, torch.Tensor | None]) -> dict[int, torch.Tensor | None]:
    return {i: None if t is None else t.clone() for i, t in states.items()}


def _state_tensors(layers: list[LinearAttentionCacheLayerMixin]) -> Iterator[torch.Tensor]:
    for layer in layers:
        for states in (layer.conv_states, layer.recurrent_states):
            yield from (t for t in states.values() if t is not None)


def _bytes(tensor: torch.Tensor | None) -> int:
    return 0 if tensor is None else tensor.numel() * tensor.element_size()
