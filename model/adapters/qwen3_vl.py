"""Qwen3-VL: ChatML turns without a default system prompt, a timestamp per frame group, interleaved M-RoPE,
DeepStack visual features added to the first decoder layers.

Conversation layout (the family's chat template and video prompt, one user turn per clip):

    <|im_start|>user\\n<0.5 seconds><|vision_start|><|video_pad|> x n<|vision_end|><1.5 seconds><|vision_start|>...
    <|vision_end|><|im_end|>\\n
    <|im_start|>user\\nWhat happened?<|im_end|>\\n<|im_start|>assistant\\n  ...answer...  <|im_end|>\\n

Each temporal patch (2 frames) is one frame group with its own timestamp (the mean stream second of its two
frames, as Qwen3VLProcessor writes it) and n = (h/32) * (w/32) tokens (patch 16, merge 2). Positions follow the
model's get_rope_index: the clip's video grid (t, h, w) is split into t grids (1, h, w), one per group; the
interleaving of the M-RoPE axes happens inside the model's rotary embedding and needs nothing here.

DeepStack: the vision tower also returns features of some of its layers (deepstack_visual_indexes); the decoder
adds the k-th of them to the hidden states of the visual tokens after its k-th layer. The input embeddings alone
therefore do not describe a clip: `chunk_inputs` gives each prefill chunk its token ids and the visual features of
the visual tokens inside it (transformers' `mm_encoder_outputs`), so the model adds them as it would in one pass.
Text segments (questions, answers, probes) have no visual tokens and need nothing more than their embeddings.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

import numpy as np
import torch
from transformers import PreTrainedModel
from transformers.models.qwen3_vl.modeling_qwen3_vl import BaseModelOutputWithDeepstackFeatures

from model.adapters.base import Segment, sparse_positions
from model.adapters.frames import validate_clip
from model.adapters.qwen2_vl import Qwen2VLAdapter


class Qwen3VLAdapter(Qwen2VLAdapter):
    """Adapter for model_type qwen3_vl (Qwen3-VL-2B/4B/8B-Instruct and alike)."""

    family: ClassVar[str] = "qwen3_vl"

    def conversation_prefix(self) -> Segment:
        """Qwen3-VL's template adds no system prompt when none is given: the conversation starts empty."""
        ids = torch.zeros(1, 0, dtype=torch.long)
        return Segment(input_ids=ids, model_inputs=self.text_model_inputs(ids), kind="prefix")

    def clip_segment(self, frames: np.ndarray, t_start: float, t_end: float) -> Segment:
        validate_clip(frames, t_start, t_end)
        view = self.clip_view(frames)  # [F', h, w, 3] uint8: what the change tracker compares
        pixels, grid = self.patchify(view)  # [P, C*tps*p*p], (t, h, w)
        per_group = grid[1] * grid[2] // self.merge_size**2
        groups = "".join(
            f"<{stamp:.1f} seconds><|vision_start|>" + "<|video_pad|>" * per_group + "<|vision_end|>"
            for stamp in self.group_timestamps(frames.shape[0], t_start, t_end)
        )
        seg = self.text_segment(f"<|im_start|>user\n{groups}<|im_end|>\n", kind="clip")
        n_vis = grid[0] * per_group
        found = int((seg.input_ids == self.video_token_id).sum())
        if found != n_vis:
            raise RuntimeError(f"tokenizer produced {found} video placeholders, expected {n_vis}")
        seg.model_inputs["pixel_values_videos"] = torch.from_numpy(pixels)
        seg.model_inputs["video_grid_thw"] = torch.tensor([grid], dtype=torch.long)
        seg.num_visual_tokens = n_vis
        seg.view = view
        return seg

    def group_timestamps(self, n_frames: int, t_start: float, t_end: float) -> list[float]:
        """Stream second of each temporal patch: the mean of its first and last frame's times (an odd last frame
        is repeated, as the video processor pads it)."""
        step = (t_end - t_start) / n_frames
        times = [t_start + i * step for i in range(n_frames)]
        times += [times[-1]] * (-n_frames % self.temporal_patch_size)
        tps = self.temporal_patch_size
        return [(times[i] + times[i + tps - 1]) / 2 for i in range(0, len(times), tps)]

    def segment_position_ids(self, segment: Segment, start: int) -> tuple[torch.Tensor, int]:
        """As Qwen2-VL, with each clip's grid (t, h, w) split into t grids (1, h, w): one block per frame group."""
        if segment.positions is not None:  # a sparse clip: the whole clip's positions at its kept tokens
            return sparse_positions(segment, start)
        grids = segment.model_inputs.get("video_grid_thw")
        if grids is None:
            return super().segment_position_ids(segment, start)
        per_group = grids.repeat_interleave(grids[:, 0], dim=0)
        per_group[:, 0] = 1
        view = Segment(segment.input_ids, {**segment.model_inputs, "video_grid_thw": per_group}, kind=segment.kind)
        return super().segment_position_ids(view, start)

    @torch.no_grad()
    def chunk_inputs(self, model: PreTrainedModel, segment: Segment) -> Callable[[int, int], dict] | None:
        """For a clip: a function of a chunk [start, stop) of its tokens giving that chunk's forward inputs
        (input_ids and the visual + DeepStack features of the visual tokens inside it); None for text."""
        if "pixel_values_videos" not in segment.model_inputs:
            return None
        device = model.device
        out = model.get_video_features(
            segment.model_inputs["pixel_values_videos"].to(device),
            segment.model_inputs["video_grid_thw"].to(device),
            return_dict=True,
        )
        features = torch.cat(out.pooler_output, dim=0)  # [N_vis, hidden]
        deepstack = [torch.cat(level, dim=0) for level in out.deepstack_features]  # each [N_vis, hidden]
        if segment.visual_select is not None:  # a sparse clip: the kept tokens of the temporal patches encoded
            select = segment.visual_select.to(device)
            features, deepstack = features[select], [level[select] for level in deepstack]
        ids = segment.input_ids
        visual = ids[0] == self.video_token_id  # [T]
        before = torch.cumsum(visual, 0) - visual.long()  # visual tokens before each position

        def piece(start: int, stop: int) -> dict:
            chunk = {"input_ids": ids[:, start:stop].to(device)}
            count = int(visual[start:stop].sum())
            if count:
                first = int(before[start])
                rows = slice(first, first + count)
                video = BaseModelOutputWithDeepstackFeatures(
                    pooler_output=(features[rows],), deepstack_features=[(level[rows],) for level in deepstack]
                )
                chunk["mm_encoder_outputs"] = {"video": video}
            return chunk

        return piece
