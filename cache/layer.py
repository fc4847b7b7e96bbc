"""One layer of the bounded cache: transformers' DynamicLayer plus, per token, what eviction needs.

`BoundedCache` holds one of these per decoder layer (or a `StaticBoundedLayer`, which keeps the same
tensors in preallocated buffers). Eviction is `keep(index)`, the same call on every layer.
"""

from __future__ import annotations

import torch
from transformers.cache_utils import DynamicLayer


class BoundedLayer(DynamicLayer):
    """A DynamicLayer that also keeps, per token, its positions, its place in the stream and received attention.

    keys/values: [B, H_kv, N, D]; positions: [B, H_kv, N, P] int64 (where its key is rotated now);
    origin: [B, H_kv, N, P] int64 (its position had nothing ever been evicted); token_index: [B, H_kv, N]
    int64 (its rank in the whole stream); attention: [B, H_kv, N] float32.
    """

    def __init__(self) -> None:
        super().__init__()
        self.positions: torch.Tensor | None = None
        self.origin: torch.Tensor | None = None
        self.token_index: torch.Tensor | None = None
        self.attention: torch.Tensor | None = None
        self.staged_positions: torch.Tensor | None = None  # [B, 1, T, P] of the tokens being added
        self.staged_origin: torch.Tensor | None = None  # [B, 1, T, P]
        self.staged_index: torch.Tensor | None = None  # [1, 1, T]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if self.staged_positions is None:
            raise RuntimeError("positions of the new tokens were not staged (BoundedCache.stage_positions)")
        keys, values = super().update(key_states, value_states)
        batch, heads, new = key_states.shape[:3]
        pos = self.staged_positions.expand(batch, heads, new, -1)
        if pos.shape[2] != new:
            raise RuntimeError(f"staged positions for {pos.shape[2]} tokens, model added {new}")
        fresh = torch.zeros(batch, heads, new, dtype=torch.float32, device=key_states.device)
        origin = self.staged_origin.expand(batch, heads, new, -1)
        index = self.staged_index.expand(batch, heads, new)
        self.positions = _append(self.positions, pos)
        self.origin = _append(self.origin, origin)
        self.token_index = _append(self.token_index, index)
        self.attention = _append(self.attention, fresh)
        return keys, values

    def keep(self, index: torch.Tensor) -> None:
        """Keeps the tokens at `index` ([B, H_kv, K]) in every per-token tensor, in that order."""
        self.keys = gather_tokens(self.keys, index)
        self.values = gather_tokens(self.values, index)
        self.positions = gather_tokens(self.positions, index)
        self.origin = gather_tokens(self.origin, index)
        self.token_index = self.token_index.gather(2, index)
        self.attention = self.attention.gather(2, index)

    def reset(self) -> None:
        super().reset()
        self.positions = self.origin = self.token_index = self.attention = None
        self.staged_positions = self.staged_origin = self.staged_index = None


def _append(old: torch.Tensor | None, new: torch.Tensor) -> torch.Tensor:
    return new if old is None else torch.cat([old, new], dim=2)


def gather_tokens(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    # x: [B, H, N, D], index: [B, H, K] -> [B, H, K, D] (advanced indexing: faster than gather on CPU)
    batch, heads = index.shape[:2]
    rows = torch.arange(batch, device=x.device)[:, None, None]
    cols = torch.arange(heads, device=x.device)[None, :, None]
    return x[rows, cols, index]
