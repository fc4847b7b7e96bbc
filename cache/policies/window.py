"""`window`: window attention, keeping only the most recent tokens."""

import torch

from cache.policies.base import EvictionPolicy
from cache.policies.view import TokenView


class WindowAttention(EvictionPolicy):
    name = "window"

    def score(self, view: TokenView) -> torch.Tensor:
        return self._recency(view)
