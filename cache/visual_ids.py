"""Frame and region ids of the stream's visual tokens, by original position (a token's rank in the stream).

The model tells the cache which tokens it adds are visual and where they come from (`BoundedCache.stage_positions`,
`visual=`); the cache only carries the integers for the policies (`TokenView.frame`, `.region`) and knows nothing
else about video. Text tokens have no entry and read as -1. Bounded: entries of tokens that are neither cached
nor in the host store are dropped at every eviction (`retain`).
"""

from __future__ import annotations

import torch


class VisualIds:
    """Sorted stream positions of visual tokens with their (frame, region) ids: [M] and [M, 2] int64."""

    def __init__(self) -> None:
        self.position = torch.empty(0, dtype=torch.long)
        self.ids = torch.empty(0, 2, dtype=torch.long)

    def __len__(self) -> int:
        return int(self.position.numel())

    def add(self, first: int, ids: torch.Tensor, device: torch.device | str | None = None) -> None:
        """The T tokens at stream positions first, first + 1, ... (after every entry) with `ids` ([T, 2] int64:
        frame, region; -1 for a text token, which gets no entry). The table lives on `device` (the cache's)."""
        visual = (ids[:, 0] >= 0).nonzero().squeeze(1)
        if not visual.numel():
            return
        if not len(self) and device is not None:
            self.position, self.ids = self.position.to(device), self.ids.to(device)
        where = self.position.device
        self.position = torch.cat([self.position, (visual + first).to(where)])
        self.ids = torch.cat([self.ids, ids[visual].long().to(where)])

    def lookup(self, position: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(frame, region) of the tokens at `position` (any shape): two tensors of its shape, -1 for text."""
        none = torch.full_like(position, -1)
        if not len(self):
            return none, none.clone()
        table = self.position.to(position.device)
        at = torch.searchsorted(table, position.contiguous()).clamp(max=len(self) - 1)
        found = table[at] == position
        ids = self.ids.to(position.device)[at]  # [..., 2]
        return torch.where(found, ids[..., 0], none), torch.where(found, ids[..., 1], none)

    def retain(self, cached: torch.Tensor, stored_from: int) -> None:
        """Keeps the entries of tokens still `cached` (positions, any shape) or in the host store (positions
        >= `stored_from`)."""
        if not len(self):
            return
        keep = (self.position >= stored_from) | torch.isin(self.position, cached.reshape(-1).to(self.position.device))
        self.position, self.ids = self.position[keep], self.ids[keep]

    def drop_from(self, position: int) -> None:
        """Forgets the tokens at stream positions >= `position` (taken out again: a probe's prompt)."""
        keep = self.position < position
        self.position, self.ids = self.position[keep], self.ids[keep]

    def clear(self) -> None:
        self.position, self.ids = self.position[:0], self.ids[:0]
