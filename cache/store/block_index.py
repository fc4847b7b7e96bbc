"""The host store's index: every block's key bounds in two growing tensors, oldest first.

Per block, layer and KV head, the per-channel minimum and maximum of its keys (RoPE undone) are kept as
centre and radius, laid out [L, H_kv, capacity, D] so that scoring a question is one batched matrix product
per tensor over the live rows, with no copy of the index per question. Rows [start, stop) are live;
dropping the oldest block moves `start`; when the end is reached, the live rows move to the front of a
buffer twice their size (amortised O(1) per block).
"""

from __future__ import annotations

import torch


class BlockIndex:
    def __init__(self) -> None:
        self.center: torch.Tensor | None = None  # [L, H, capacity, D]
        self.radius: torch.Tensor | None = None
        self.start = self.stop = 0

    def __len__(self) -> int:
        return self.stop - self.start

    def append(self, low: torch.Tensor, high: torch.Tensor) -> None:
        """One block's per-channel key bounds, [L, H, D] each."""
        if self.center is None or self.stop == self.center.shape[2]:
            self._regrow(low)
        self.center[:, :, self.stop] = (high + low) / 2
        self.radius[:, :, self.stop] = (high - low) / 2
        self.stop += 1

    def drop_oldest(self) -> None:
        self.start += 1

    def remove(self, row: int) -> None:
        """Takes out the live row `row` (0 = oldest); copies the index (rare: a block that cannot be read)."""
        keep = [i for i in range(self.start, self.stop) if i != self.start + row]
        self.center = self.center[:, :, keep].clone()
        self.radius = self.radius[:, :, keep].clone()
        self.start, self.stop = 0, len(keep)

    def clear(self) -> None:
        self.center = self.radius = None
        self.start = self.stop = 0

    def _regrow(self, like: torch.Tensor) -> None:
        live = len(self)
        capacity = max(64, 2 * live)
        layers, heads, dim = like.shape
        center = torch.empty(layers, heads, capacity, dim)
        radius = torch.empty(layers, heads, capacity, dim)
        if live:
            center[:, :, :live] = self.center[:, :, self.start : self.stop]
            radius[:, :, :live] = self.radius[:, :, self.start : self.stop]
        self.center, self.radius, self.start, self.stop = center, radius, 0, live

    def bounds(self, queries: torch.Tensor) -> torch.Tensor:
        """queries: [L, H_kv, K, D] (RoPE undone; K = query heads per KV head x rows) -> [NB, L, H_kv]: Quest's
        upper bound of the logit any key of the block can get, sum_d max(q*lo, q*hi) = q.c + |q|.r, best row."""
        center = self.center[:, :, self.start : self.stop]
        radius = self.radius[:, :, self.start : self.stop]
        bound = queries @ center.transpose(-1, -2) + queries.abs() @ radius.transpose(-1, -2)  # [L, H, K, NB]
        return bound.amax(dim=2).permute(2, 0, 1)
