"""`window`: window attention, keeping only the most recent tokens."""

import torch

from cache.policies.base import EvictionPolicy


class WindowAttention(EvictionPolicy):
    name = "window"

    def score(self, n: int, attention: torch.Tensor | None, device: torch.device) -> torch.Tensor:
        return self._recency(n, device)
