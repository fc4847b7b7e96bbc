"""Compact positions: close the gaps that eviction leaves, so an endless stream stays in range.

Positions are per token, with P components (P = 1 for RoPE; P = 3 for Qwen2-VL's M-RoPE, whose first,
temporal component never decreases along the sequence). A *segment* starts at a token whose first
component lies above every component of all earlier tokens (a text token, the start of a video block,
or the first token kept after an eviction gap). Compaction keeps each segment's internal layout (frames
stay frames, a frame's spatial grid stays intact), restarts each segment right after everything before
it, and turns any remaining gap inside a segment into a step of one. An uncut conversation laid out by
the model's own rules therefore compacts to itself; for RoPE the result is simply 0..N-1.
"""

from __future__ import annotations

import torch


def compact_positions(positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (compacted positions, per-token shift new - old).

    positions: [..., N, P] int64, tokens in cache order. The shift is [..., N] and is the same for
    every component of a token, so a key rotated by it lands exactly at its new position.
    """
    *lead, n, p = positions.shape
    x = positions.reshape(-1, n, p)  # [R, N, P]
    first = x[..., 0]
    top = x.max(dim=-1).values  # highest component of each token
    prev_top = torch.cat([first[:, :1] - 1, top.cummax(dim=1).values[:, :-1]], dim=1)
    is_start = first > prev_top
    step = torch.diff(first, dim=1, prepend=first[:, :1]).clamp(0, 1)
    step = torch.where(is_start, torch.zeros_like(step), step)
    segment = is_start.long().cumsum(dim=1) - 1  # [R, N] segment id of each token
    steps_so_far = step.cumsum(dim=1)
    # steps_so_far never decreases, so its minimum over a segment is its value at the segment's start
    seg_base = torch.full_like(first, torch.iinfo(torch.int64).max).scatter_reduce(
        1, segment, steps_so_far, reduce="amin"
    )
    local_first = steps_so_far - seg_base.gather(1, segment)
    local_top = local_first + (top - first)
    seg_extent = torch.full_like(first, -1).scatter_reduce(1, segment, local_top, reduce="amax")
    seg_length = seg_extent + 1  # 0 for segment ids that do not occur
    seg_start = seg_length.cumsum(dim=1) - seg_length
    new_first = seg_start.gather(1, segment) + local_first
    shift = new_first - first
    compacted = x + shift[..., None]
    return compacted.reshape(positions.shape), shift.reshape(*lead, n)
