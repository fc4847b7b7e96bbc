"""Perplexity of a long text streamed through the bounded cache (Inf-MLLM's Fig. 5).

The text goes in chunks; each chunk is one prompt (scored, then evicted to budget), so every token is
predicted from the cache as it stood plus the chunk so far. Reported per segment of `segment` tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from cache.bounded_cache import BoundedCache
from cache.config import CacheConfig
from cache.runner import CachedRunner
from quality.lm import TextLM


def stream_perplexity(
    lm: TextLM,
    ids: list[int],
    config: CacheConfig,
    chunk: int = 512,
    segment: int = 4096,
    on_chunk: Callable[[int], None] | None = None,
) -> list[float]:
    """Perplexity of each `segment`-token slice of `ids` (the first token is not predicted).

    on_chunk(tokens) is called after each chunk (for progress bars).
    """
    cache = BoundedCache.for_model(lm.model, config)
    runner = CachedRunner(lm.model, cache, lm.position_dims, chunk_size=chunk)
    nll = torch.zeros(len(ids), dtype=torch.float64)  # nll[i]: -log p(ids[i] | ids[:i]); nll[0] unused
    previous = None  # logits after the last token of the previous chunk: [vocab]
    for start in range(0, len(ids), chunk):
        piece = ids[start : start + chunk]
        logits = runner.prefill(input_ids=torch.tensor([piece]), all_logits=True)[0].float()  # [T, vocab]
        predictors = logits[:-1] if previous is None else torch.cat([previous[None], logits[:-1]])
        targets = torch.tensor(piece[1:] if previous is None else piece)
        losses = torch.nn.functional.cross_entropy(predictors, targets, reduction="none")
        first = start + 1 if previous is None else start
        nll[first : start + len(piece)] = losses.double()
        previous = logits[-1]
        if on_chunk is not None:
            on_chunk(len(piece))
    return [
        math.exp(float(nll[max(lo, 1) : lo + segment].mean()))
        for lo in range(0, len(ids), segment)
        if lo + segment <= len(ids) or lo == 0
    ]
