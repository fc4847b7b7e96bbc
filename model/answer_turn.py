"""One answer in progress: what a `StreamingSession` keeps between the decode steps of an answer.

A lone `session.ask()` and several sessions answering together (`model.answer_together`) drive the same
steps: open the turn (recall, question prefill), then per token `advance` (pick the next token, the text it
adds) and `feed` (the logits after it), and at the end close the turn (the answer's tail and the end-of-turn
tokens into the cache) and record its metrics.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from cache.store.recall import RecallStats


@dataclass
class AnswerTurn:
    """State of one answer. logits: [1, vocab] to pick the next token from (None: the question's prefill was
    interrupted); fed_last: whether the last picked token is in the cache (its logits were computed)."""

    question: str
    prefill_tokens: int  # question tokens
    started: float  # perf_counter() when the question arrived
    cache_tokens_before: int
    cache_tokens_after: int
    evict_ms: float
    recall: RecallStats
    logits: torch.Tensor | None
    cut_off: bool = False
    answer_ids: list[int] = field(default_factory=list)
    text: str = ""  # decoded so far (without a trailing incomplete character)
    ttft: float | None = None
    decode_started: float = 0.0
    fed_last: bool = True
    done: bool = False
    evidence: list = field(default_factory=list)  # model.evidence.Evidence: the moments the question drew on

    def feed(self, logits: torch.Tensor) -> None:
        """The logits after the token `advance` returned ([1, vocab]): that token is in the cache now."""
        self.logits = logits
        self.fed_last = True

    def first_token_seen(self) -> None:
        """Marks the time to first token (once) and the start of decoding."""
        if self.ttft is None:
            self.ttft = time.perf_counter() - self.started
            self.decode_started = time.perf_counter()
