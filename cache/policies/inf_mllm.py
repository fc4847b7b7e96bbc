"""`inf-mllm` (Ning et al. 2024, Algorithm 1): attention saddles plus recent tokens, with an attention bias.

With W the attention of a new prompt's last `l` query rows over the `n` cached tokens (captured as the
mean over those rows, per KV head):
  S = mean(W[m-l:m, 0:n-l])                 how much the newest tokens attend to each older token
  D = -[n-l-1, ..., 1, 0] * b / (n-l)       pushes older tokens down so new saddles can enter
and the cache keeps the top-r older tokens by S + D plus the l recent tokens. With `pool` > 1 the older
tokens' S + D is span-pooled first (CacheConfig.pool), so a fact the window attends to is kept with the
tokens that follow it; `pool=1` is Algorithm 1 exactly as published.

Selection is per KV head: heads specialise (some look at sinks, some at recent frames, some at a far
object), and a per-head top-r lets each keep what it attends to, for the same memory and one gather.
"""

import torch

from cache.policies.base import EvictionPolicy


class InfMLLM(EvictionPolicy):
    name = "inf-mllm"
    capture = "window"
    per_head = True

    def score(self, n: int, attention: torch.Tensor | None, device: torch.device) -> torch.Tensor:
        if attention is None:
            raise RuntimeError("inf-mllm needs window attention scores; none were captured")
        older = n - self.config.window
        scores = attention.float().clone()
        if older > 0:
            distance = torch.arange(older - 1, -1, -1, device=scores.device, dtype=torch.float32)
            scores[..., :older] -= distance * (self.config.bias / older)
        return self._protect_recent(self._pool_older(scores, n), n)
