"""A sparse clip (model/sparse_clip.py) on the tiny models of every family: kept tokens carry the positions and
the embeddings they have in the whole clip, the next segment starts where it would after the whole clip, and
SmolVLM2 leaves whole frames out with their "Frame from" lines."""

import numpy as np
import pytest
import torch

from tests.support.model_fixtures import ALL_FAMILIES, smooth_frame, tiny


def _frames(n: int = 4) -> np.ndarray:
    return np.stack([smooth_frame(90, 120, seed=i) for i in range(n)])


def _keep(adapter, segment, pattern: str, seed: int = 0) -> np.ndarray:
    """A keep mask over the clip's change layout: "random", "none", or "one group" (only the last group)."""
    layout = adapter.change_layout()
    groups = segment.view.shape[0] // layout.group
    side = segment.view.shape[1] // layout.region, segment.view.shape[2] // layout.region
    if pattern == "none":
        return np.zeros((groups, *side), dtype=bool)
    if pattern == "one group":
        keep = np.zeros((groups, *side), dtype=bool)
        keep[-1] = True
        return keep
    keep = np.random.default_rng(seed).random((groups, *side)) < 0.4
    if layout.whole_groups:
        keep[:] = keep.any(axis=(1, 2), keepdims=True)
        keep[0] = False  # at least one frame out
    return keep


def _token_keep(adapter, full, sparse) -> torch.Tensor:
    """[T] bool over the whole clip's tokens: which of them the sparse clip holds (matched by position)."""
    full_pos, _ = adapter.segment_position_ids(full, 0)
    sparse_pos, _ = adapter.segment_position_ids(sparse, 0)
    full_cols = full_pos.reshape(full_pos.shape[0], -1).T.tolist()
    kept = {tuple(c) for c in sparse_pos.reshape(sparse_pos.shape[0], -1).T.tolist()}
    return torch.tensor([tuple(c) in kept for c in full_cols])


@pytest.mark.parametrize("pattern", ["random", "none", "one group"])
@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_kept_tokens_have_the_whole_clips_positions_and_embeddings(family, pattern):
    model, _, adapter = tiny(family)
    full = adapter.clip_segment(_frames(), 8.0, 12.0)
    keep = _keep(adapter, full, pattern)
    sparse = adapter.sparse_clip(full, keep)
    start = 37
    full_pos, full_next = adapter.segment_position_ids(full, start)
    pos, next_start = adapter.segment_position_ids(sparse, start)
    assert next_start == full_next  # the next segment starts where it would after the whole clip
    layout = adapter.change_layout()
    per_group = full.num_visual_tokens // (full.view.shape[0] // layout.group)
    expected_visual = int(keep.any(axis=(1, 2)).sum()) * per_group if layout.whole_groups else int(keep.sum())
    assert sparse.num_visual_tokens == expected_visual < full.num_visual_tokens
    assert sparse.full_visual_tokens == full.num_visual_tokens
    # the tokens the sparse clip holds, in order, are the whole clip's tokens at the same indices
    if family == "smolvlm":
        token_keep = _token_keep(adapter, full, sparse)
    else:
        token_keep = full.input_ids[0] != adapter.video_token_id
        token_keep[~token_keep.clone()] = torch.from_numpy(keep.reshape(-1))
    assert torch.equal(sparse.input_ids[0], full.input_ids[0, token_keep])
    assert torch.equal(pos, full_pos[..., token_keep])
    with torch.inference_mode():
        got = adapter.segment_embeddings(model, sparse)
        whole = adapter.segment_embeddings(model, full)
    torch.testing.assert_close(got[0], whole[0, token_keep], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen2_5_vl"])
def test_qwen_temporal_patches_without_kept_tokens_skip_the_vision_tower(family):
    _, _, adapter = tiny(family)
    full = adapter.clip_segment(_frames(6), 0.0, 6.0)  # 3 temporal patches
    keep = np.zeros_like(_keep(adapter, full, "none"))
    keep[1, 0, 0] = keep[1, -1, -1] = True
    sparse = adapter.sparse_clip(full, keep)
    t, h, w = full.model_inputs["video_grid_thw"][0].tolist()
    assert sparse.model_inputs["video_grid_thw"].tolist() == [[1, h, w]]
    assert sparse.model_inputs["pixel_values_videos"].shape[0] == h * w  # one temporal patch's pixels
    assert torch.equal(
        sparse.model_inputs["pixel_values_videos"], full.model_inputs["pixel_values_videos"][h * w : 2 * h * w]
    )
    pos, _ = adapter.segment_position_ids(sparse, 0)
    visual = sparse.input_ids[0] == adapter.video_token_id
    m = adapter.merge_size
    assert pos[0, 0, visual].unique().numel() == 1  # both of the second temporal patch's moment
    rows, cols = pos[1, 0, visual], pos[2, 0, visual]
    assert (rows[1] - rows[0], cols[1] - cols[0]) == (h // m - 1, w // m - 1)  # opposite corners of its grid


def test_smolvlm_leaves_out_whole_frames_with_their_lines():
    _, _, adapter = tiny("smolvlm")
    full = adapter.clip_segment(_frames(3), 60.0, 63.0)
    keep = np.zeros_like(_keep(adapter, full, "none"))
    keep[1, 0, 0] = True  # one token of the middle frame: the whole frame stays
    sparse = adapter.sparse_clip(full, keep)
    text = adapter.tokenizer.decode(sparse.input_ids[0])
    assert "Frame from 01:01" in text and "Frame from 01:00" not in text and "Frame from 01:02" not in text
    assert text.startswith("User: <t=60.0-63.0s>") and sparse.num_visual_tokens == adapter.tokens_per_frame
    assert sparse.model_inputs["pixel_values"].shape[1] == 1
