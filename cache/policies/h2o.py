"""`h2o` (Zhang et al. 2023): heavy hitters by attention accumulated over every query so far, plus recent tokens.

Each KV head keeps its own heavy hitters. The accumulated score of a token is the attention it received,
summed over all query rows of every prefill and decode step (averaged over the query heads of its KV group).
"""

import torch

from cache.policies.base import EvictionPolicy
from cache.policies.view import TokenView


class HeavyHitterOracle(EvictionPolicy):
    name = "h2o"
    capture = "accumulate"
    per_head = True

    def score(self, view: TokenView) -> torch.Tensor:
        if view.attention is None:
            raise RuntimeError("h2o needs accumulated attention scores; none were captured")
        return self._protect_recent(view.attention.float(), view)
