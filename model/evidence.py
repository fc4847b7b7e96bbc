"""Which moments of the stream an answer drew on: its evidence, as stream-time spans of clips.

Two sources inside the model's memory (a third, timeline notes, is added by the app):
- `recall`: the clips whose blocks the question brought back from the host store (tier 2 -> tier 1);
- `attention`: the resident clips the question attended to most. The question's retrieval window already
  scores every cached token when it is prefilled under a policy that captures attention (inf-mllm, snapkv,
  h2o); those scores, summed per clip over layers and heads, rank the clips. Policies that capture nothing
  (window, streaming-llm, full) give no attention evidence.
A `ClipIndex` maps the stream's token ranks to the clips they came with (bounded: the oldest entries go).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import torch

from bus.stats import EvidenceSpan

MAX_CLIPS = 50_000  # clips remembered per stream: about two days of 4-second clips
ATTENDED_CLIPS = 3  # resident clips cited per answer


@dataclass(frozen=True)
class Evidence:
    """A moment an answer drew on: stream seconds [start, end), where it came from, and how strongly."""

    start: float
    end: float
    source: str  # "recall" | "attention" | "timeline"
    score: float = 0.0  # attention share (attention), tokens recalled (recall)

    def as_span(self) -> EvidenceSpan:
        """As answers carry it (seconds and score to 4 decimals; the app names the stream)."""
        return EvidenceSpan(
            start=round(self.start, 4), end=round(self.end, 4), source=self.source, score=round(self.score, 4)
        )


class ClipIndex:
    """Token ranks [first, last) of every clip ingested, with its stream seconds; oldest first, bounded."""

    def __init__(self, max_clips: int = MAX_CLIPS) -> None:
        self._clips: deque[tuple[int, int, float, float]] = deque(maxlen=max_clips)

    def add(self, first: int, last: int, t_start: float, t_end: float) -> None:
        if last > first:
            self._clips.append((first, last, t_start, t_end))

    def clear(self) -> None:
        self._clips.clear()

    def clips_of(self, tokens: torch.Tensor, weights: torch.Tensor) -> dict[tuple[float, float], float]:
        """Sums `weights` (1-D, same length as `tokens`) per clip span."""
        if not self._clips:
            return {}
        firsts = torch.tensor([c[0] for c in self._clips])
        lasts = torch.tensor([c[1] for c in self._clips])
        at = torch.searchsorted(firsts, tokens.cpu(), right=True) - 1
        inside = (at >= 0) & (tokens.cpu() < lasts[at.clamp(min=0)])
        totals: dict[tuple[float, float], float] = {}
        for clip, weight in zip(at[inside].tolist(), weights.cpu()[inside].tolist(), strict=True):
            _, _, start, end = self._clips[clip]
            totals[(start, end)] = totals.get((start, end), 0.0) + weight
        return totals


def recalled(index: ClipIndex, spans: list[tuple[int, int]]) -> list[Evidence]:
    """The clips of recalled token ranges [first, last), in stream order, each with its recalled tokens."""
    if not spans:
        return []
    tokens = torch.cat([torch.arange(first, last) for first, last in spans])
    counts = index.clips_of(tokens, torch.ones(tokens.numel()))
    return [Evidence(s, e, "recall", n) for (s, e), n in sorted(counts.items())]


def attended(index: ClipIndex, layers, top: int = ATTENDED_CLIPS) -> list[Evidence]:
    """The `top` resident clips with the largest share of the question's recorded attention (layers: the
    cache's layers after the question's prefill; token_index and attention [B, H_kv, N] each)."""
    tokens = torch.cat([layer.token_index[0].reshape(-1) for layer in layers])
    weights = torch.cat([layer.attention[0].reshape(-1) for layer in layers]).float()
    total = float(weights.sum())
    if total <= 0:
        return []
    per_clip = index.clips_of(tokens, weights)
    best = sorted(per_clip.items(), key=lambda item: -item[1])[:top]
    return [Evidence(s, e, "attention", w / total) for (s, e), w in best if w > 0]
