"""`strided`: every `stride`-th older token by its original position, plus the recent tokens.

A sampled memory of the whole stream (a worked example of a policy that scores positions, not attention):
the older tokens kept are those whose original position (`TokenView.position`: the rank in the stream,
which eviction never changes) is a multiple of `stride`, the newest of them first when the budget cannot
hold them all; room left over goes to the newest other tokens. Because it reads original positions, the
kept sample stays the same sample over any number of evictions. Scoring the i-th *cached* token instead
would resample the survivors at every eviction and decay into plain recency within a few dozen evictions.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from cache.policies.base import EvictionPolicy, PolicySettings, check_count
from cache.policies.view import TokenView


@dataclass(frozen=True)
class StridedSettings(PolicySettings):
    """stride: keep the older tokens whose original position is a multiple of it (1 = every token, the newest
    that fit: window attention)."""

    stride: int = field(default=10, metadata={"help": "strided: keep every k-th older token by original position"})

    def __post_init__(self) -> None:
        check_count("stride", self.stride, 1, " token (1 = every token)")

    def describe(self) -> str:
        return f"stride {self.stride}"


class Strided(EvictionPolicy):
    name = "strided"
    settings_class = StridedSettings
    settings: StridedSettings

    def score(self, view: TokenView) -> torch.Tensor:
        # cache order is stream order within each head, so the cached index ranks by age: newest scores highest;
        # a token on the stride outranks every token off it. [L, B, H_kv, n]
        on_stride = (view.position % self.settings.stride == 0).float()
        scores = on_stride * view.n + self._recency(view)
        return self._protect_recent(scores, view)
