"""The eviction-policy interface, the settings every policy's own settings class extends, and the shared top-k
selection every policy goes through.

A policy only scores tokens; it never holds tensors. The cache gathers the kept indices itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch

if TYPE_CHECKING:
    from cache.config import CacheConfig

KEEP = float("inf")  # score of a token a policy must keep (recent window, sinks)
POOL_MODES = ("max", "avg", "span")


@dataclass(frozen=True)
class PolicySettings:
    """A policy's own settings (none here: the settings of a policy without knobs).

    A policy with knobs declares a frozen subclass beside it, checks each knob in `__post_init__` (a ValueError
    naming the allowed values) and names it in its class attribute `settings_class`. A field with `metadata={"help":
    ...}` becomes a command-line flag and a --config key (app/config_flags.py); `"flag"` in the metadata names
    the flag when it is not `--` + the field's name.
    """

    def check_fits(self, budget: int, window: int) -> None:
        """Raises ValueError when these settings cannot work in a cache of `budget` tokens with this `window`."""

    def describe(self) -> str:
        """The settings for a status line, e.g. 'bias 0.001, pool 8 (span)'; '' when there are none."""
        return ""


class EvictionPolicy:
    """Scores cached tokens: higher = keep. Tokens scored `KEEP` are never evicted.

    `capture` says what attention the cache must record for this policy:
    None (nothing), "window" (mean attention of a prompt's last `window` rows, prefill only) or
    "accumulate" (attention summed over every query row, prefill and decode: H2O).
    `settings_class` is the class of the policy's own settings; `self.settings` is the instance the cache was
    configured with (`CacheConfig.policy_settings`).
    """

    name: ClassVar[str]
    settings_class: ClassVar[type[PolicySettings]] = PolicySettings
    capture: ClassVar[str | None] = None
    evicts: ClassVar[bool] = True
    per_head: ClassVar[bool] = False  # True when different KV heads may keep different tokens

    def __init__(self, config: CacheConfig) -> None:
        self.config = config
        self.settings = config.policy_settings

    def score(self, n: int, attention: torch.Tensor | None, device: torch.device) -> torch.Tensor:
        """Scores of `n` cached tokens, broadcastable to [L, B, H_kv, n].

        attention: [L, B, H_kv, n] recorded attention (see `capture`), or None when not captured.
        """
        raise NotImplementedError

    def _recency(self, n: int, device: torch.device) -> torch.Tensor:
        # [1, 1, 1, n]: token i scores i, so the newest tokens win.
        return torch.arange(n, device=device, dtype=torch.float32).view(1, 1, 1, n)

    def _pool_older(self, scores: torch.Tensor, n: int, kernel: int, mode: str) -> torch.Tensor:
        """Pools the older tokens [0, n - window) of [..., n] scores over `kernel` tokens (see `pool_tokens`)."""
        older = n - self.config.window
        if kernel <= 1 or older <= 1:
            return scores
        pooled = pool_tokens(scores[..., :older], kernel, mode)
        return torch.cat([pooled, scores[..., older:]], dim=-1)

    def _protect_recent(self, scores: torch.Tensor, n: int) -> torch.Tensor:
        scores = scores.clone()
        scores[..., max(n - self.config.window, 0) :] = KEEP
        return scores


def select_keep(
    policy: EvictionPolicy,
    n: int,
    target: int,
    attention: torch.Tensor | None,
    shape: tuple[int, ...],
    pinned: torch.Tensor | None = None,
) -> torch.Tensor:
    """Indices of the tokens to keep, in their original order: [L, B, H_kv, target] (int64).

    One top-k over every layer and head at once; `shape` is [L, B, H_kv]. `pinned` ([L, B, H_kv, n] bool):
    tokens kept whatever the policy says (recalled for the current answer).
    """
    device = attention.device if attention is not None else torch.device("cpu")
    scores = policy.score(n, attention, device).expand(*shape, n)
    if pinned is not None:
        scores = scores.masked_fill(pinned.to(scores.device), KEEP)
    keep = torch.topk(scores, k=target, dim=-1, sorted=False).indices
    return keep.sort(dim=-1).values


def pool_tokens(scores: torch.Tensor, kernel: int, mode: str) -> torch.Tensor:
    """Pools [..., n] scores along the token axis with a stride-1 window of `kernel` tokens; same shape.

    max/avg: centred window (SnapKV's clustering); span: the window ending at each token, so a token
    inherits the score of the best of the `kernel - 1` tokens before it.
    """
    lead, n = scores.shape[:-1], scores.shape[-1]
    flat = scores.reshape(-1, 1, n)
    if mode == "span":
        padded = torch.nn.functional.pad(flat, (kernel - 1, 0), value=float("-inf"))
        pooled = torch.nn.functional.max_pool1d(padded, kernel, stride=1)
    else:
        left = (kernel - 1) // 2
        pad = (left, kernel - 1 - left)
        if mode == "max":
            pooled = torch.nn.functional.max_pool1d(torch.nn.functional.pad(flat, pad, value=float("-inf")), kernel, 1)
        else:  # avg over the neighbours that exist (edges are not diluted by padding)
            ones = torch.ones_like(flat)
            total = torch.nn.functional.avg_pool1d(torch.nn.functional.pad(flat, pad), kernel, 1)
            count = torch.nn.functional.avg_pool1d(torch.nn.functional.pad(ones, pad), kernel, 1)
            pooled = total / count
    return pooled.reshape(*lead, n)
