"""`full`: never evicts. The unbounded reference every bounded policy is compared against."""

import torch

from cache.policies.base import EvictionPolicy


class FullCache(EvictionPolicy):
    name = "full"
    evicts = False

    def score(self, n: int, attention: torch.Tensor | None, device: torch.device) -> torch.Tensor:
        raise RuntimeError("the full cache never evicts")
