"""Compact positions: identity on an uncut layout, gap closing after eviction, same shift per component."""

import torch

from cache.positions import compact_positions
from tests.support.tiny_text_models import build_pair


def test_rope_positions_compact_to_a_range():
    pos = torch.tensor([0, 1, 2, 7, 8, 30, 31, 99])[:, None]  # [N, 1]
    compacted, shift = compact_positions(pos[None])
    assert compacted[0, :, 0].tolist() == list(range(8))
    assert torch.equal(compacted[0], pos + shift[0][:, None])


def _qwen2_vl_layout():
    """The model's own M-RoPE positions for: 3 text, a video of 2x4x6 patches (merged 2x2), 4 text, video, 2 text."""
    reference, _, _ = build_pair("qwen2-vl")
    cfg = reference.config
    tokens_per_video = 2 * (4 // 2) * (6 // 2)
    video = [cfg.vision_start_token_id] + [cfg.video_token_id] * tokens_per_video
    ids = [5, 6, 7] + video + [8, 9, 10, 11] + video + [12, 13]
    input_ids = torch.tensor([ids])
    mm_types = (input_ids == cfg.video_token_id).int() * 2  # 2 marks video tokens
    grid = torch.tensor([[2, 4, 6], [2, 4, 6]])
    positions, _ = reference.model.get_rope_index(input_ids, video_grid_thw=grid, mm_token_type_ids=mm_types)
    return positions[:, 0].T.contiguous(), input_ids  # [N, 3]


def test_uncut_mrope_layout_is_left_alone():
    layout, _ = _qwen2_vl_layout()
    assert (layout[:, 1] != layout[:, 0]).any()  # really 3-D: height differs from time somewhere
    compacted, shift = compact_positions(layout[None])
    assert torch.equal(compacted[0], layout)
    assert int(shift.abs().max()) == 0


def test_cut_mrope_layout_closes_gaps_and_keeps_frames_intact():
    layout, _ = _qwen2_vl_layout()
    n = layout.shape[0]
    # evict the first text and the first half of the first video (its first frame), keep the rest
    kept = torch.tensor([0] + list(range(1 + 3 + 1 + 6, n)))
    cut = layout[kept]
    compacted, shift = compact_positions(cut[None])
    compacted, shift = compacted[0], shift[0]
    assert torch.equal(compacted, cut + shift[:, None])  # one shift for all three components
    assert compacted.max() < cut.max()  # the gap is closed
    frame = slice(1, 1 + 6)  # the kept second frame of the first video
    torch.testing.assert_close(compacted[frame] - compacted[frame][0], cut[frame] - cut[frame][0])
    # every token still starts no earlier than the tokens before it (time never goes backwards)
    assert (torch.diff(compacted[:, 0]) >= 0).all()
