"""A sparse clip: a clip segment with some of its tokens left out, the rest at their whole-clip positions.

Kept tokens keep the positions (M-RoPE: time, row, column; RoPE: the 1-D index) they have in the whole clip,
so for everything downstream (eviction, re-rotation, the host store, recall) a sparse clip is a clip some of
whose tokens were already evicted. The next segment starts where it would after the whole clip.
"""

from __future__ import annotations

import torch

from model.adapters.base import Segment, VideoAdapter


def sparse_segment(
    adapter: VideoAdapter,
    segment: Segment,
    token_keep: torch.Tensor,
    model_inputs: dict[str, torch.Tensor],
    visual_select: torch.Tensor | None,
    num_visual: int,
    visual_cells: torch.Tensor,
) -> Segment:
    """The tokens `token_keep` ([T] bool) of the whole clip `segment`, with the forward inputs they need.

    visual_select: [N_kept] indices of the kept visual tokens in what the vision tower returns for
    `model_inputs`' pixels (None: all of it). num_visual: how many kept tokens are visual. visual_cells: [num_visual]
    their cells of the whole clip's token grid (`Segment.visual_cells`)."""
    if token_keep.shape != (segment.num_tokens,):
        raise ValueError(f"token mask of {tuple(token_keep.shape)} for a segment of {segment.num_tokens} tokens")
    full, next_start = adapter.segment_position_ids(segment, 0)  # [P, 1, T] or [1, T]
    ids = segment.input_ids[:, token_keep]
    return Segment(
        input_ids=ids,
        model_inputs=model_inputs,
        num_visual_tokens=num_visual,
        kind=segment.kind,
        view=segment.view,
        positions=full[..., token_keep],
        position_extent=next_start,
        visual_select=visual_select,
        full_visual_tokens=segment.num_visual_tokens,
        visual_cells=visual_cells,
    )
