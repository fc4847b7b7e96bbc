"""The eviction-policy interface, the settings every policy's own settings class extends (with the checks they
share), and the shared top-k selection every policy goes through.

A policy only scores a view of the tokens (`cache/policies/view.py`); it never holds tensors and never sees the
cache or its config. The cache gathers the kept indices itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch

from cache.policies.picture import check_room
from cache.policies.view import TokenView

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


def check_count(name: str, value: object, minimum: int, meaning: str = "") -> None:
    """A whole number >= `minimum` (not a bool), else ValueError "{name} must be >= {minimum}{meaning}, got ..."."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be >= {minimum}{meaning}, got {value!r}")


def check_number(name: str, value: object, minimum: float, meaning: str = "") -> None:
    """A real number >= `minimum` (int or float, not a bool, not NaN), else ValueError as `check_count`'s."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= minimum:
        raise ValueError(f"{name} must be >= {minimum:g}{meaning}, got {value!r}")


def check_choice(name: str, value: object, allowed: Sequence[str]) -> None:
    """One of `allowed`, else ValueError "unknown {name} ...; allowed: a, b"."""
    if value not in allowed:
        raise ValueError(f"unknown {name} {value!r}; allowed: {', '.join(allowed)}")


class EvictionPolicy:
    """Scores cached tokens: higher = keep. Tokens scored `KEEP` are never evicted.

    `capture` says what attention the cache must record for this policy:
    None (nothing), "window" (mean attention of a prompt's last `window` rows, prefill only) or
    "accumulate" (attention summed over every query row, prefill and decode: H2O).
    `settings_class` is the class of the policy's own settings; `self.settings` is the instance the cache was
    configured with (`CacheConfig.policy_settings`). Everything else a policy needs (the window, the tokens'
    attention, original positions and origin) comes in the `TokenView` it scores.
    """

    name: ClassVar[str]
    settings_class: ClassVar[type[PolicySettings]] = PolicySettings
    capture: ClassVar[str | None] = None
    evicts: ClassVar[bool] = True
    per_head: ClassVar[bool] = False  # True when different KV heads may keep different tokens

    def __init__(self, settings: PolicySettings | None = None) -> None:
        self.settings = self.settings_class() if settings is None else settings
        if type(self.settings) is not self.settings_class:
            expected, got = self.settings_class.__name__, type(settings).__name__
            raise ValueError(f"policy {self.name!r} takes {expected}, got {got}")

    def score(self, view: TokenView) -> torch.Tensor:
        """Scores of the view's `n` cached tokens, broadcastable to [L, B, H_kv, n]."""
        raise NotImplementedError

    @classmethod
    def behaviour(cls) -> tuple[str | None, bool, bool]:
        """What the cache does differently for this policy, beyond its scores: (capture, evicts, per_head).

        Two policies of one behaviour run through the same cache, decode and batch code and differ only in which
        tokens `score` picks; the test suites that run whole models take one policy of each behaviour.
        """
        return cls.capture, cls.evicts, cls.per_head

    @staticmethod
    def _recency(view: TokenView) -> torch.Tensor:
        # [1, 1, 1, n]: token i scores i, so the newest tokens win.
        return torch.arange(view.n, device=view.device, dtype=torch.float32).view(1, 1, 1, view.n)

    @staticmethod
    def _pool_older(scores: torch.Tensor, view: TokenView, kernel: int, mode: str) -> torch.Tensor:
        """Pools the older tokens [0, n - window) of [..., n] scores over `kernel` tokens (see `pool_tokens`)."""
        older = view.n - view.window
        if kernel <= 1 or older <= 1:
            return scores
        pooled = pool_tokens(scores[..., :older], kernel, mode)
        return torch.cat([pooled, scores[..., older:]], dim=-1)

    @staticmethod
    def _protect_recent(scores: torch.Tensor, view: TokenView) -> torch.Tensor:
        scores = scores.clone()
        scores[..., view.older :] = KEEP
        return scores


def select_keep(
    policy: EvictionPolicy,
    view: TokenView,
    pinned: torch.Tensor | None = None,
    picture: torch.Tensor | None = None,
    shared: bool = False,
) -> torch.Tensor:
    """Indices of the tokens to keep, in their original order: [L, B, H_kv, view.target] (int64).

    One top-k over every layer and head at once. `pinned` ([L, B, H_kv, n] bool): tokens kept whatever the
    policy says (recalled for the current answer). `picture` ([L, B, H_kv, n] bool): the current picture
    (cache/policies/picture.py), never evicted; the policy's scores choose the rest. With a picture, an eviction
    that cannot keep it, the retrieval window and the policy's `KEEP` tokens raises `PictureOverflow`; recalled
    tokens come next (they are in the host store: where they do not all fit, some of them go).
    `shared`: one selection for every layer and head, by the mean of their scores (`CacheConfig.selection`);
    every layer and head must then hold the same tokens, as a cache that always shares holds them.
    """
    scores = policy.score(view).expand(*view.shape, view.n)
    if shared and policy.per_head:
        if not bool((view.position == view.position[:1, :, :1]).all()):
            raise RuntimeError("a shared selection needs every layer and head to hold the same tokens")
        scores = scores.mean(dim=(0, 2), keepdim=True).expand_as(scores)
    if picture is None:
        if pinned is not None:
            scores = scores.masked_fill(pinned.to(scores.device), KEEP)
    else:
        picture = picture.to(scores.device)
        check_room((scores == KEEP) | view.recent | picture, picture, view.target)
        if pinned is not None:  # above every score a policy gives, below KEEP (the picture, the window, sinks)
            highest = torch.finfo(scores.dtype).max
            scores = torch.where(pinned.to(scores.device) & (scores < KEEP), highest, scores)
        scores = scores.masked_fill(picture | view.recent, KEEP)
    keep = torch.topk(scores, k=view.target, dim=-1, sorted=False).indices
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
