"""`inf-mllm` (Ning et al. 2024, Algorithm 1): attention saddles plus recent tokens, with an attention bias.

With W the attention of a new prompt's last `l` query rows over the `n` cached tokens (captured as the
mean over those rows, per KV head):
  S = mean(W[m-l:m, 0:n-l])                 how much the newest tokens attend to each older token
  D = -[n-l-1, ..., 1, 0] * b / (n-l)       pushes older tokens down so new saddles can enter
and the cache keeps the top-r older tokens by S + D plus the l recent tokens. With `pool` > 1 the older
tokens' S + D is span-pooled first (InfMllmSettings.pool), so a fact the window attends to is kept with the
tokens that follow it; `pool=1` is Algorithm 1 exactly as published.

Selection is per KV head: heads specialise (some look at sinks, some at recent frames, some at a far
object), and a per-head top-r lets each keep what it attends to, for the same memory and one gather.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from cache.policies.base import POOL_MODES, EvictionPolicy, PolicySettings, check_choice, check_count, check_number
from cache.policies.view import TokenView


@dataclass(frozen=True)
class InfMllmSettings(PolicySettings):
    """bias: `b`, the attention bias; larger = shorter memory (paper: 1e-4 .. 0.1 by model); 0 disables it.
    pool: span pooling of the older tokens' scores before the top-k, in tokens: each older token also scores
    the best of its `pool` neighbours, so what follows an attended token is kept too (copying a fact needs
    the tokens after the one the question finds). 1 = no pooling, which is Algorithm 1 exactly as published.
    Default 8 "span": chosen by needle retrieval on the reference model (docs/memory.md).
    pool_mode: "max" (centred max), "avg" (centred mean, SnapKV's) or "span" (the best of the `pool` tokens up
    to and including this one: a token is kept when one just before it is)."""

    bias: float = field(default=1e-3, metadata={"help": "Inf-MLLM attention bias b (larger = shorter memory)"})
    pool: int = field(
        default=8,
        metadata={
            "help": "span pooling of inf-mllm scores, in tokens: keeps what follows an attended token "
            "(1 = Inf-MLLM's Algorithm 1 exactly as published)"
        },
    )
    pool_mode: str = field(
        default="span",
        metadata={
            "help": "pooling: centred max, centred mean, or span (the tokens after an attended one)",
            "choices": POOL_MODES,
        },
    )

    def __post_init__(self) -> None:
        check_number("bias", self.bias, 0, " (0 disables the attention bias)")
        check_count("pool", self.pool, 1, " token (1 = no pooling)")
        check_choice("pool_mode", self.pool_mode, POOL_MODES)

    def describe(self) -> str:
        return f"bias {self.bias:g}, pool {self.pool} ({self.pool_mode})"


class InfMLLM(EvictionPolicy):
    name = "inf-mllm"
    settings_class = InfMllmSettings
    capture = "window"
    per_head = True
    settings: InfMllmSettings

    def score(self, view: TokenView) -> torch.Tensor:
        if view.attention is None:
            raise RuntimeError("inf-mllm needs window attention scores; none were captured")
        older = view.n - view.window
        scores = view.attention.float().clone()
        if older > 0:
            distance = torch.arange(older - 1, -1, -1, device=scores.device, dtype=torch.float32)
            scores[..., :older] -= distance * (self.settings.bias / older)
        scores = self._pool_older(scores, view, self.settings.pool, self.settings.pool_mode)
        return self._protect_recent(scores, view)
