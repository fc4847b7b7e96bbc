"""`streaming-llm` (Xiao et al. 2023): the first `sinks` tokens (attention sinks) plus the most recent ones."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from cache.policies.base import KEEP, EvictionPolicy, PolicySettings, check_count
from cache.policies.view import TokenView


@dataclass(frozen=True)
class StreamingLlmSettings(PolicySettings):
    """sinks: the first tokens always kept (the attention sinks); the rest of the budget holds the newest."""

    sinks: int = field(default=4, metadata={"help": "sink tokens kept by streaming-llm"})

    def __post_init__(self) -> None:
        check_count("sinks", self.sinks, 0)

    def check_fits(self, budget: int, window: int) -> None:
        if self.sinks + window >= budget:
            raise ValueError(f"sinks + window ({self.sinks} + {window}) must be below the budget ({budget})")

    def describe(self) -> str:
        return f"sinks {self.sinks}"


class StreamingLLM(EvictionPolicy):
    name = "streaming-llm"
    settings_class = StreamingLlmSettings
    settings: StreamingLlmSettings

    def score(self, view: TokenView) -> torch.Tensor:
        scores = self._recency(view).clone()
        scores[..., : self.settings.sinks] = KEEP
        return scores
