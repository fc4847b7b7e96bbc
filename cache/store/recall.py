"""Recall: bring blocks of the host store (tier 2) back into the device cache (tier 1) for one answer.

    stats = recall_for_prompt(runner, input_ids=question_ids, position_ids=positions)   # probe, rank, merge
    runner.prefill(input_ids=question_ids, evict_to=budget - headroom + stats.tokens)   # recalled are pinned
    ... decode the answer ...
    runner.cache.unpin()                                                                # next prompt evicts

The question is first run as a probe (its KV dropped again) to get its queries; they rank the store's
blocks; the best blocks that are not already resident, up to `CacheConfig.recall` tokens, are merged into
every layer in stream order, and every token moves to compact positions (keys re-rotated), so recalled
tokens sit where they were in the stream relative to the resident ones. Recalled tokens are pinned until
the answer is done.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from cache.layer import gather_tokens
from cache.policies.base import KEEP
from cache.positions import compact_positions
from cache.store.host_store import Block

if TYPE_CHECKING:  # recall works on the device cache it is handed; it never builds one
    from cache.bounded_cache import BoundedCache


@dataclass
class RecallStats:
    tokens: int  # recalled into the device cache
    blocks: int
    search_ms: float  # probe + ranking
    copy_ms: float  # merge into the device cache
    spans: tuple[tuple[int, int], ...] = ()  # stream token ranks [first, last) of the blocks brought back


def recall_for_prompt(runner, **prompt) -> RecallStats:
    """Probes with the prompt (input_ids or inputs_embeds, position_ids), ranks the store, merges the best."""
    cache: BoundedCache = runner.cache
    if cache.store is None or not cache.store.blocks or cache.config.recall == 0:
        return RecallStats(0, 0, 0.0, 0.0)
    started = time.perf_counter()
    queries, query_positions = runner.probe(**prompt)
    ranked = cache.store.rank(queries, query_positions)
    chosen = _choose(cache, ranked)
    searched = time.perf_counter()
    tokens = merge_blocks(cache, chosen) if chosen else 0
    done = time.perf_counter()
    spans = tuple((b.first, b.first + b.tokens) for b in chosen)
    return RecallStats(tokens, len(chosen), (searched - started) * 1e3, (done - searched) * 1e3, spans)


def _choose(cache: BoundedCache, ranked: list[Block]) -> list[Block]:
    """Best-ranked blocks not wholly resident in the device cache, within the recall budget; in stream order."""
    resident = cache.kv_layers[0].token_index[0]  # [H_kv, N]
    room, chosen = cache.config.recall, []
    for block in ranked:
        if block.tokens > room:
            continue
        index = torch.arange(block.first, block.first + block.tokens, device=resident.device)
        if int(torch.isin(resident, index).sum()) == resident.shape[0] * block.tokens:
            continue  # every head holds all of it already
        chosen.append(block)
        room -= block.tokens
        if room < cache.store.block:
            break
    return sorted(chosen, key=lambda b: b.first)


def merge_blocks(cache: BoundedCache, blocks: list[Block]) -> int:
    """Puts the blocks' tokens into every layer and head, in stream order, and pins them; returns how many.

    A head that already holds some of them drops its own copy; every head then keeps the same count, so
    heads with fewer duplicates also drop their least-attended resident tokens (few: recalled blocks are
    mostly absent). Positions are compacted (or, in 'original' mode, left as they were in the stream).
    """
    first = cache.kv_layers[0]
    device, dtype = first.keys.device, first.keys.dtype
    loaded = [(block, cache.store.load(block, dtype)) for block in blocks]
    loaded = [(block, kv) for block, kv in loaded if kv is not None]  # an unreadable block is dropped
    if not loaded:
        return 0
    blocks = [block for block, _ in loaded]
    recalled_index = torch.cat([torch.arange(b.first, b.first + b.tokens) for b in blocks]).to(device)
    count = recalled_index.numel()
    resident = torch.stack([layer.token_index for layer in cache.kv_layers])  # [L, B, H, N]
    duplicate = torch.isin(resident, recalled_index)
    picture = cache.picture_of(*cache.visual_ids.lookup(resident))  # never dropped to make room (None: no picture)
    n = resident.shape[-1]
    target = n - int(duplicate.sum(dim=-1).max()) + count
    keys = torch.cat([kv[0] for _, kv in loaded], dim=2).to(device)  # [L, H, R, D]
    values = torch.cat([kv[1] for _, kv in loaded], dim=2).to(device)
    positions = torch.cat([b.positions for b in blocks]).to(device)  # [R, P]
    origin = torch.cat([b.origin for b in blocks]).to(device)
    for layer_idx, layer in enumerate(cache.kv_layers):
        batch, heads = layer.keys.shape[:2]
        score = layer.attention + 1e-9 * layer.token_index.float()  # ties go to newer tokens
        if picture is not None:
            score = score.masked_fill(picture[layer_idx], KEEP)
        score = score.masked_fill(duplicate[layer_idx], -KEEP)  # a picture token in a block: its recalled copy stays
        score = torch.cat([score, torch.full((batch, heads, count), KEEP, device=device)], dim=-1)
        token_index = torch.cat([layer.token_index, recalled_index.expand(batch, heads, -1)], dim=-1)
        pick = torch.topk(score, target, dim=-1).indices
        pick = pick.gather(-1, token_index.gather(-1, pick).argsort(dim=-1))  # stream order
        layer.keys = _merged(layer.keys, keys[layer_idx][None], pick)
        layer.values = _merged(layer.values, values[layer_idx][None], pick)
        layer.positions = _merged(layer.positions, positions[None, None], pick)
        layer.origin = _merged(layer.origin, origin[None, None], pick)
        attention = torch.cat([layer.attention, torch.zeros(batch, heads, count, device=device)], dim=-1)
        layer.attention = attention.gather(-1, pick)
        layer.token_index = token_index.gather(-1, pick)
    if cache.config.positions == "rerotate":
        _compact_from_origin(cache)
    cache.pin(recalled_index)
    return count


def _merged(mine: torch.Tensor, theirs: torch.Tensor, pick: torch.Tensor) -> torch.Tensor:
    """Resident [B, H, N, X] + recalled [1 or B, 1 or H, R, X] (same for every head), gathered at `pick`."""
    both = torch.cat([mine, theirs.expand(mine.shape[0], mine.shape[1], -1, -1)], dim=2)
    return gather_tokens(both, pick)


def _compact_from_origin(cache: BoundedCache) -> None:
    """Compact positions laid out from each token's stream position; keys re-rotated to them."""
    origin = torch.stack([layer.origin for layer in cache.kv_layers])  # [L, B, H, K, P]
    compacted, _ = compact_positions(origin)
    for layer, new_pos in zip(cache.kv_layers, compacted, strict=True):
        delta = (new_pos - layer.positions)[..., 0]
        layer.keys = cache.rotator.rotate(layer.keys, delta)
        layer.positions = new_pos
    next_position = int(compacted.max()) + 1
    cache.position_offset += cache.next_position - next_position
    cache.next_position = next_position
