"""`full`: never evicts. The unbounded reference every bounded policy is compared against."""

import torch

from cache.policies.base import EvictionPolicy
from cache.policies.view import TokenView


class FullCache(EvictionPolicy):
    name = "full"
    evicts = False

    def score(self, view: TokenView) -> torch.Tensor:
        raise RuntimeError("the full cache never evicts")
