"""`snapkv` (Li et al. 2024): observation-window attention, pooled, top-k per KV head, plus the window.

The score of each older token is the attention the prompt's last `window` query rows give it (averaged
over the rows and over the query heads of its KV group), average-pooled over `kernel` neighbouring tokens
(SnapKV's clustering kernel: 7). No attention bias. `--pool` and `--pool-mode` tune inf-mllm, not this policy.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from cache.policies.base import EvictionPolicy, PolicySettings, check_count
from cache.policies.view import TokenView


@dataclass(frozen=True)
class SnapKvSettings(PolicySettings):
    """kernel: tokens of the centred average pooling of the scores (SnapKV's clustering; 1 = none). Not a flag:
    the app runs SnapKV as published; benchmarks may set it."""

    kernel: int = 7

    def __post_init__(self) -> None:
        check_count("snapkv kernel", self.kernel, 1, " token (1 = no pooling)")

    def describe(self) -> str:
        return f"kernel {self.kernel}"


class SnapKV(EvictionPolicy):
    name = "snapkv"
    settings_class = SnapKvSettings
    capture = "window"
    per_head = True
    settings: SnapKvSettings

    def score(self, view: TokenView) -> torch.Tensor:
        if view.attention is None:
            raise RuntimeError("snapkv needs window attention scores; none were captured")
        pooled = self._pool_older(view.attention.float(), view, self.settings.kernel, "avg")
        return self._protect_recent(pooled, view)
