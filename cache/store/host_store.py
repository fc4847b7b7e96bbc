"""The second tier: every token of the stream, kept on the host in blocks, bounded in bytes.

The device cache (tier 1) holds `budget` tokens chosen by the policy. Each token also reaches this store
once, when the cache archives what was added since its last eviction point, so whatever tier 1 evicts is
still here. A block is a run of consecutive tokens (at most `block` of them, never spanning two eviction
points): its keys and values for every layer and KV head (in RAM, or files in a folder; optionally int8 or
int4), and an index entry kept in RAM, the per-channel minimum and maximum of its keys with RoPE undone
([L, H_kv, 2, D]), which a question's queries score cheaply (Quest's bound). When the store outgrows its
byte bound the oldest blocks go first, and are counted.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import torch

from cache.rope import KeyRotator
from cache.store.block_index import BlockIndex
from cache.store.kv_quant import QUANT_MODES, Quantized, dequantize, quantize
from cache.store.payloads import FolderPayloads, Payload, RamPayloads, check_folder

logger = logging.getLogger(__name__)


def default_store_bytes() -> int:
    """A quarter of the RAM available now, at most 4 GiB (on Jetson, RAM is shared with the GPU: this is
    what neither the model nor the device cache has taken when the cache is built)."""
    import psutil

    return min(psutil.virtual_memory().available // 4, 4 * 2**30)


@dataclass
class Block:
    """Tokens [first, first + tokens) of the stream. Its keys and values ([L, H_kv, T, D], maybe quantised)
    live in `home` (RAM or a folder) and are read back with `HostStore.load`; positions and origin: [T, P]
    (where the keys are rotated, and the position had nothing been evicted)."""

    first: int
    tokens: int
    positions: torch.Tensor
    origin: torch.Tensor
    nbytes: int  # what it costs the store's bound: keys, values and its index row
    stream_time: float | None  # stream second of the clip its tokens came with (None: not known)
    home: RamPayloads | FolderPayloads


class HostStore:
    """Blocks of archived KV in host memory (or a folder), oldest first, at most `max_bytes` of them.

    quant "int8"/"int4" compresses keys per channel and values per token (cache/store/kv_quant.py). A folder that
    fails at run time (full, removed) is reported once in `errors` and the store goes on in RAM only.
    """

    def __init__(
        self, max_bytes: int, block: int, rotator: KeyRotator, folder: Path | None = None, quant: str = "none"
    ) -> None:
        if max_bytes <= 0 or block < 1:
            raise ValueError(f"store needs max_bytes > 0 and block >= 1, got {max_bytes} and {block}")
        if quant not in QUANT_MODES:
            raise ValueError(f"unknown store compression {quant!r}; allowed: {', '.join(QUANT_MODES)}")
        if folder is not None:
            check_folder(folder, max_bytes)
        self.max_bytes = max_bytes
        self.block = block
        self.rotator = rotator
        self.folder = folder
        self.bits = QUANT_MODES[quant]
        self.blocks: deque[Block] = deque()
        self.index = BlockIndex()  # row i: blocks[i]'s key bounds
        self.errors: list[str] = []  # run-time storage problems, for the session to report
        self.stream_time: float | None = None  # set by the session before a clip's tokens arrive
        self._ram = RamPayloads()
        self._home: RamPayloads | FolderPayloads = FolderPayloads(folder) if folder else self._ram
        self.bytes = self.tokens = 0
        self.dropped_blocks = self.dropped_tokens = self.lost_tokens = 0

    @property
    def where(self) -> str:
        return self._home.where

    @property
    def oldest_time(self) -> float | None:
        return self.blocks[0].stream_time if self.blocks else None

    def archive(self, keys: list[torch.Tensor], values: list[torch.Tensor], positions, origin, first: int) -> None:
        """Stores T new tokens starting at stream index `first`. keys/values: per layer [H_kv, T, D] (batch 1,
        tokens not yet evicted, so every head holds the same ones); positions/origin: [T, P]."""
        positions, origin = positions.to("cpu"), origin.to("cpu")
        rotated = torch.stack(keys).detach().to("cpu").float()  # [L, H, T, D]
        total = rotated.shape[2]
        # kept with RoPE undone (as if at position 0): ranking reads them as they are, recall rotates them back
        keys_all = self.rotator.rotate(rotated, -positions[:, 0].view(1, 1, total)).to(keys[0].dtype)
        values_all = torch.stack(values).detach().to("cpu", copy=True)
        for start in range(0, total, self.block):
            stop = min(start + self.block, total)
            k, v = keys_all[:, :, start:stop], values_all[:, :, start:stop]
            low, high = k.float().amin(dim=2), k.float().amax(dim=2)  # [L, H, D]: Quest's per-channel bounds
            payload = self._pack(k, v)
            nbytes = 2 * low.numel() * 4 + sum(t.numel() * t.element_size() for t in payload.values())
            home = self._put(first + start, payload)
            block = Block(first + start, stop - start, positions[start:stop].clone(), origin[start:stop].clone(),
                          nbytes, self.stream_time, home)  # fmt: skip
            self.index.append(low, high)
            self._add(block)

    def load(self, block: Block, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The block's keys (rotated at their stored positions) and values, [L, H_kv, T, D]; None (and the
        block dropped) if it cannot be read."""
        plain = self.load_plain(block, dtype)
        if plain is None:
            return None
        keys, values = plain
        return self.rotator.rotate(keys, block.positions[:, 0].view(1, 1, block.tokens)), values

    def load_plain(
        self, block: Block, dtype: torch.dtype, with_values: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor | None] | None:
        """Like `load`, with the keys' RoPE undone (how the store keeps them); values only if asked."""
        try:
            payload = block.home.get(block.first)
        except OSError as e:
            if not self.lost_tokens:  # once: a folder that went away fails every block it held
                self._report(f"host store: blocks could not be read back ({e}); they are dropped and counted")
            self.index.remove(self.blocks.index(block))
            self.blocks.remove(block)
            self._forget(block)
            self.lost_tokens += block.tokens
            return None
        if self.bits is None:
            return payload["keys"].to(dtype), payload["values"].to(dtype) if with_values else None
        keys = dequantize(Quantized.from_dict(_sub(payload, "keys.")), dtype)
        values = dequantize(Quantized.from_dict(_sub(payload, "values.")), dtype) if with_values else None
        return keys, values

    def _pack(self, keys: torch.Tensor, values: torch.Tensor) -> Payload:
        if self.bits is None:
            return {"keys": keys.clone(), "values": values.clone()}
        packed_keys = quantize(keys, self.bits, group_dim=2).to_dict()  # per channel, over the block's tokens
        packed_values = quantize(values, self.bits, group_dim=3).to_dict()  # per token
        payload = {f"keys.{name}": t for name, t in packed_keys.items()}
        payload.update({f"values.{name}": t for name, t in packed_values.items()})
        return payload

    def _put(self, key: int, payload: Payload) -> RamPayloads | FolderPayloads:
        try:
            self._home.put(key, payload)
            return self._home
        except OSError as e:
            self._report(
                f"host store folder {self.folder}: cannot write ({e.strerror or e}); "
                "the store goes on in RAM only (blocks already written stay there)"
            )
            self._home = self._ram
            self._ram.put(key, payload)
            return self._ram

    def _report(self, message: str) -> None:
        logger.error(message)
        self.errors.append(message)

    def take_errors(self) -> list[str]:
        errors, self.errors = self.errors, []
        return errors

    def _add(self, block: Block) -> None:
        self.blocks.append(block)
        self.bytes += block.nbytes
        self.tokens += block.tokens
        while self.bytes > self.max_bytes and len(self.blocks) > 1:
            old = self.blocks.popleft()
            self.index.drop_oldest()
            self._forget(old)
            self.dropped_blocks += 1
            self.dropped_tokens += old.tokens

    def _forget(self, block: Block) -> None:
        block.home.drop(block.first)
        self.bytes -= block.nbytes
        self.tokens -= block.tokens

    def reset(self) -> None:
        for block in self.blocks:
            block.home.drop(block.first)
        self.blocks.clear()
        self.index.clear()
        self.bytes = self.tokens = 0
        self.dropped_blocks = self.dropped_tokens = self.lost_tokens = 0

    def rank(self, queries: torch.Tensor, query_positions: torch.Tensor, shortlist: int = 512) -> list[Block]:
        """The store's blocks for a question, most relevant first, in two stages.

        queries: [L, H_q, R, D], the question's last R query rows per layer; query_positions: [R].
        1. Every block: Quest's bounds (see `bounds`), standardised per layer and head across blocks and
           averaged, so no single layer's scale dominates. Cheap: two matmuls over the RAM index.
        2. The best `shortlist` of them (all of them up to 16K tokens with blocks of 32): the attention mass
           that the question's last query row (the one that predicts the answer) gives each block's own keys,
           softmax over the shortlist's tokens with RoPE undone on both sides, averaged over layers and heads.
           Reads the shortlisted keys once. Measured on the reference model (scripts/tune_recall.py, README),
           it finds a needle's block where the bounds alone rank it in the middle of the store.
        """
        if not self.blocks:
            return []
        blocks = list(self.blocks)
        scores = self.bounds(queries, query_positions)
        if len(blocks) > 1:
            scores = (scores - scores.mean(dim=0)) / (scores.std(dim=0) + 1e-6)
        by_bound = [blocks[i] for i in scores.mean(dim=(1, 2)).argsort(descending=True).tolist()]
        head, tail = by_bound[:shortlist], by_bound[shortlist:]
        loaded = [(block, self.load_plain(block, torch.float32, with_values=False)) for block in head]
        loaded = [(block, kv[0]) for block, kv in loaded if kv is not None]  # unreadable blocks are dropped
        if not loaded:
            return tail
        last_row = queries[:, :, -1:], query_positions[-1:]
        mass = self._attention_mass([b for b, _ in loaded], [k for _, k in loaded], *last_row)
        return [loaded[i][0] for i in mass.argsort(descending=True).tolist()] + tail

    def _attention_mass(self, blocks, keys, queries, query_positions) -> torch.Tensor:
        """[len(blocks)]: mean softmax mass per block, over the blocks' own tokens (RoPE undone on both sides:
        `keys` are as the store keeps them)."""
        plain_keys = torch.cat(keys, dim=2)  # [L, H, N, D]
        layers, kv_heads, n, dim = plain_keys.shape
        rows = queries.shape[2]
        back = -query_positions.view(1, 1, rows)
        q = self.rotator.rotate(queries.float().cpu(), back.cpu()).view(layers, kv_heads, -1, dim)
        probs = torch.einsum("lhkd,lhnd->lhkn", q, plain_keys).mul(dim**-0.5).softmax(dim=-1)
        owner = torch.cat([torch.full((b.tokens,), i) for i, b in enumerate(blocks)])
        per_token = probs.mean(dim=(0, 1, 2))  # [N]
        return torch.zeros(len(blocks)).index_add_(0, owner, per_token)

    def bounds(self, queries: torch.Tensor, query_positions: torch.Tensor) -> torch.Tensor:
        """[NB, L, H_kv]: per block, layer and KV head, Quest's upper bound of the attention logit any of
        the block's keys can get from that head's group of queries (sum over channels of
        max(q * min, q * max), RoPE undone on both sides), the best over the query rows."""
        layers, q_heads, rows, dim = queries.shape
        kv_heads = self.index.center.shape[1]
        q = self.rotator.rotate(queries.float().cpu(), -query_positions.view(1, 1, rows).cpu())
        return self.index.bounds(q.view(layers, kv_heads, (q_heads // kv_heads) * rows, dim))


def _sub(payload: Payload, prefix: str) -> dict[str, torch.Tensor]:
    return {name[len(prefix) :]: t for name, t in payload.items() if name.startswith(prefix)}
