"""What a policy sees of the cached tokens at an eviction point: `TokenView`.

The cache builds one view per eviction (`BoundedCache.evict`) from what it tracks per token; a policy scores
from the view and its own settings only, never from the cache or its config. Tensors are per layer and KV head
([L, B, H_kv, n]): per-head policies leave different heads holding different tokens, so the i-th cached token
of one head need not be the i-th of another. Within each head the tokens are in stream order, oldest first, and
the last `window` of them are the recent ones every policy keeps.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class TokenView:
    """The `n` cached tokens as a policy scores them.

    n:         cached tokens per layer and head.
    target:    how many of them the eviction keeps.
    window:    `l`, the retrieval window: the newest `window` tokens are recent and always kept.
    attention: [L, B, H_kv, n] float32, what the cache captured for the policy (`EvictionPolicy.capture`),
               or None when it captures nothing.
    position:  [L, B, H_kv, n] int64, each token's original position: its rank among every token ever added
               to the stream (0 for the first). Eviction, re-rotation and recall never change it, so a rule on
               it ("every k-th token") means the same at every eviction.
    origin:    [L, B, H_kv, n, P] int64, the RoPE position each token had when it was added, had nothing been
               evicted (P = 1, or 3 for M-RoPE: time, row, column).
    frame:     [L, B, H_kv, n] int64, the id of the frame a visual token shows (the model's ids: they grow along
               the stream; one id per temporal patch where the model merges frames); -1 for a text token.
    region:    [L, B, H_kv, n] int64, the region of its frame a visual token covers (row-major over the frame's
               token grid); -1 for a text token.
    device:    where the scores are to be made (that of the tensors above).
    """

    n: int
    target: int
    window: int
    attention: torch.Tensor | None
    position: torch.Tensor
    origin: torch.Tensor
    frame: torch.Tensor
    region: torch.Tensor
    device: torch.device

    @property
    def shape(self) -> tuple[int, int, int]:
        """[L, B, H_kv]: the layers, batch and KV heads every score is expanded to."""
        return tuple(self.position.shape[:3])

    @property
    def older(self) -> int:
        """How many tokens precede the window: tokens [0, older) are older, [older, n) are recent."""
        return max(self.n - self.window, 0)

    @property
    def recent(self) -> torch.Tensor:
        """[1, 1, 1, n] bool: the window's tokens."""
        return (torch.arange(self.n, device=self.device) >= self.older).view(1, 1, 1, self.n)

    @property
    def visual(self) -> torch.Tensor:
        """[L, B, H_kv, n] bool: visual tokens (the rest are text)."""
        return self.frame >= 0
