"""`streaming-llm` (Xiao et al. 2023): the first `sinks` tokens (attention sinks) plus the most recent ones."""

import torch

from cache.policies.base import KEEP, EvictionPolicy


class StreamingLLM(EvictionPolicy):
    name = "streaming-llm"

    def score(self, n: int, attention: torch.Tensor | None, device: torch.device) -> torch.Tensor:
        scores = self._recency(n, device).clone()
        scores[..., : self.config.sinks] = KEEP
        return scores
