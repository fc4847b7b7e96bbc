"""The second tier: every token of the stream, kept on the host in blocks, bounded in bytes.

The device cache (tier 1) holds `budget` tokens chosen by the policy. Each token also reaches this store
once, when the cache archives what was added since its last eviction point, so whatever tier 1 evicts is
still here. A block is a run of consecutive tokens (at most `block` of them, never spanning two eviction
points): its keys and values for every layer and KV head, and an index entry, the mean of its keys with
RoPE undone ([L, H_kv, D]), which a question's queries score cheaply. When the store outgrows its byte
bound the oldest blocks go first, and are counted.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass

import torch

from cache.rope import KeyRotator

logger = logging.getLogger(__name__)


def default_store_bytes() -> int:
    """A quarter of the RAM available now, at most 4 GiB (on Jetson, RAM is shared with the GPU: this is
    what neither the model nor the device cache has taken when the cache is built)."""
    import psutil

    return min(psutil.virtual_memory().available // 4, 4 * 2**30)


@dataclass
class Block:
    """Tokens [first, first + T) of the stream. keys/values: [L, H_kv, T, D] on the host; positions and
    origin: [T, P] (where the keys are rotated, and the position had nothing been evicted)."""

    first: int
    keys: torch.Tensor
    values: torch.Tensor
    positions: torch.Tensor
    origin: torch.Tensor
    summary: torch.Tensor  # [L, H_kv, 2, D]: per-channel min and max of its keys, RoPE undone (Quest)

    @property
    def tokens(self) -> int:
        return self.keys.shape[2]

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.keys, self.values, self.summary))


class HostStore:
    """Blocks of archived KV in host memory, oldest first, at most `max_bytes` of them."""

    def __init__(self, max_bytes: int, block: int, rotator: KeyRotator) -> None:
        if max_bytes <= 0 or block < 1:
            raise ValueError(f"store needs max_bytes > 0 and block >= 1, got {max_bytes} and {block}")
        self.max_bytes = max_bytes
        self.block = block
        self.rotator = rotator
        self.blocks: deque[Block] = deque()
        self.bytes = 0
        self.tokens = 0
        self.dropped_blocks = 0
        self.dropped_tokens = 0

    def archive(self, keys: list[torch.Tensor], values: list[torch.Tensor], positions, origin, first: int) -> None:
        """Stores T new tokens starting at stream index `first`. keys/values: per layer [H_kv, T, D] (batch 1,
        tokens not yet evicted, so every head holds the same ones); positions/origin: [T, P]."""
        keys_all = torch.stack(keys).detach().to("cpu", copy=True)  # [L, H, T, D]
        values_all = torch.stack(values).detach().to("cpu", copy=True)
        positions, origin = positions.to("cpu"), origin.to("cpu")
        total = keys_all.shape[2]
        for start in range(0, total, self.block):
            stop = min(start + self.block, total)
            self._add(
                Block(
                    first + start,
                    keys_all[:, :, start:stop].clone(),
                    values_all[:, :, start:stop].clone(),
                    positions[start:stop].clone(),
                    origin[start:stop].clone(),
                    self._summary(keys_all[:, :, start:stop], positions[start:stop]),
                )
            )

    def _summary(self, keys: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        layers, heads, tokens, _ = keys.shape
        back = -positions[:, 0].view(1, 1, tokens).expand(layers, heads, tokens)
        plain = self.rotator.rotate(keys.float(), back)  # as if every key sat at position 0
        return torch.stack([plain.amin(dim=2), plain.amax(dim=2)], dim=2)  # [L, H, 2, D]

    def _add(self, block: Block) -> None:
        self.blocks.append(block)
        self.bytes += block.nbytes
        self.tokens += block.tokens
        while self.bytes > self.max_bytes and len(self.blocks) > 1:
            old = self.blocks.popleft()
            self.bytes -= old.nbytes
            self.tokens -= old.tokens
            self.dropped_blocks += 1
            self.dropped_tokens += old.tokens

    def reset(self) -> None:
        self.blocks.clear()
        self.bytes = self.tokens = 0
        self.dropped_blocks = self.dropped_tokens = 0

    def rank(self, queries: torch.Tensor, query_positions: torch.Tensor) -> torch.Tensor:
        """Block relevance for a question, best first: indices into `blocks`.

        queries: [L, H_q, R, D], the question's last R query rows per layer; query_positions: [R].
        Each block scores, per layer and KV head, Quest's upper bound of the attention logit any of its
        keys can get from that head's group of queries (sum over channels of max(q * min, q * max), RoPE
        undone on both sides); scores are standardised per layer and head across blocks and averaged, so
        no single layer's scale dominates. Measured on the reference model, this ranks a needle's block far
        better than the mean key does (see README, "Memory beyond the budget").
        """
        if not self.blocks:
            return torch.empty(0, dtype=torch.long)
        layers, q_heads, rows, dim = queries.shape
        summaries = torch.stack([b.summary for b in self.blocks])  # [NB, L, H, 2, D]
        kv_heads = summaries.shape[2]
        back = -query_positions.view(1, 1, rows).expand(layers, q_heads, rows)
        q = self.rotator.rotate(queries.float().cpu(), back.cpu())
        q = q.view(layers, kv_heads, (q_heads // kv_heads) * rows, dim)  # [L, H, K, D]
        # sum_d max(q*lo, q*hi) = q . (hi + lo) / 2 + |q| . (hi - lo) / 2: two matmuls, no [NB, L, H, K, D]
        center = (summaries[:, :, :, 1] + summaries[:, :, :, 0]) / 2
        radius = (summaries[:, :, :, 1] - summaries[:, :, :, 0]) / 2
        bound = torch.einsum("lhkd,blhd->blhk", q, center) + torch.einsum("lhkd,blhd->blhk", q.abs(), radius)
        scores = bound.amax(dim=-1)  # [NB, L, H]
        if len(self.blocks) > 1:
            scores = (scores - scores.mean(dim=0)) / (scores.std(dim=0) + 1e-6)
        return scores.mean(dim=(1, 2)).argsort(descending=True)
