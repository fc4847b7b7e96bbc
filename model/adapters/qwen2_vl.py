"""Qwen2-VL / Qwen2.5-VL: ChatML turns, video placeholders, 3-D M-RoPE, temporal patches of 2 frames.

Conversation layout (the family's chat template, one user turn per clip):

    <|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n
    <|im_start|>user\\n<t=0.0-4.0s><|vision_start|><|video_pad|> x N<|vision_end|><|im_end|>\\n
    <|im_start|>user\\nWhat happened?<|im_end|>\\n<|im_start|>assistant\\n  ...answer...  <|im_end|>\\n

A clip of F frames [F, H, W, 3] is resized (aspect kept) so both sides are multiples of patch*merge (28),
patchified like transformers' Qwen2-VL video processor, and gives N = ceil(F/2) * (h/28) * (w/28) tokens.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import torch
from transformers import GenerationConfig, PreTrainedModel
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

from model.adapters.base import Segment, VideoAdapter, sparse_positions
from model.adapters.frames import rescale_normalize, resize_frames, validate_clip
from model.change import ChangeLayout
from model.processor import VisionTextProcessor
from model.sparse_clip import sparse_segment

SYSTEM_PROMPT = "You are a helpful assistant."
# transformers' Qwen2VLVideoProcessor defaults, used when the checkpoint's configs say nothing
VIDEO_MIN_PIXELS = 128 * 28 * 28
VIDEO_MAX_PIXELS = 768 * 28 * 28
# default per-frame pixel cap for streaming: 448x448 -> at most 256 tokens per 2 frames
STREAM_MAX_FRAME_PIXELS = 448 * 448
WIDEST_ASPECT = 2  # frame_size(): frames up to 2:1 (16:9, 4:3 ...) reach the processor with all the pixels it keeps
TEXT, VIDEO = 0, 2  # mm_token_type_ids values


class Qwen2VLAdapter(VideoAdapter):
    """Adapter for model_type qwen2_vl (and, via Qwen25VLAdapter, qwen2_5_vl)."""

    family: ClassVar[str] = "qwen2_vl"
    position_dims: ClassVar[int] = 3
    concat_dims: ClassVar[dict[str, int]] = {
        "pixel_values_videos": 0,  # [sum of patches, C * tps * p * p]
        "video_grid_thw": 0,  # [num_videos, 3]
        "second_per_grid_ts": 0,  # [num_videos]
        "mm_token_type_ids": 1,  # [1, T]
    }

    def __init__(
        self,
        model_config: Any,
        processor: VisionTextProcessor,
        generation_config: GenerationConfig | None = None,
        max_frame_pixels: int = STREAM_MAX_FRAME_PIXELS,
    ) -> None:
        super().__init__(model_config, processor, generation_config)
        ip = processor.image_processor
        vision = model_config.vision_config
        self.patch_size = int(vision.patch_size)
        self.merge_size = int(vision.spatial_merge_size)
        self.temporal_patch_size = int(vision.temporal_patch_size)
        self.factor = self.patch_size * self.merge_size
        self.resample = ip.resample
        self.rescale_factor = float(ip.rescale_factor)
        self.image_mean, self.image_std = list(ip.image_mean), list(ip.image_std)
        settings = processor.video_settings
        size = settings.get("size") or {}
        max_pixels = settings.get("max_pixels") or size.get("longest_edge") or VIDEO_MAX_PIXELS
        min_pixels = settings.get("min_pixels") or size.get("shortest_edge") or VIDEO_MIN_PIXELS
        self.max_pixels = max(self.factor**2, min(int(max_pixels), int(max_frame_pixels)))
        self.min_pixels = min(int(min_pixels), self.max_pixels)
        self.video_token_id = int(model_config.video_token_id)
        self.image_token_id = int(model_config.image_token_id)

    # ---- layout ----
    def stop_tokens(self) -> list[str]:
        return ["<|im_end|>"]

    def placeholder_tokens(self) -> list[str]:
        return ["<|vision_start|>", "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"]

    def conversation_prefix(self) -> Segment:
        return self.text_segment(f"<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n", kind="prefix")

    def question_segment(self, question: str) -> Segment:
        q = self.check_question(question)
        return self.text_segment(f"<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n", kind="question")

    def answer_end_ids(self) -> torch.Tensor:
        return self.text_segment("<|im_end|>\n").input_ids

    def text_model_inputs(self, input_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"mm_token_type_ids": self._token_types(input_ids)}

    def _token_types(self, input_ids: torch.Tensor) -> torch.Tensor:
        types = torch.zeros_like(input_ids, dtype=torch.int32)
        types[input_ids == self.image_token_id] = 1
        types[input_ids == self.video_token_id] = VIDEO
        return types

    def frame_size(self) -> tuple[int, int]:
        # The capture's box must not take pixels the processor would keep: smart_resize keeps up to max_pixels
        # whatever the aspect, so a square of max_pixels cut a 16:9 frame to 56% of them (the demo model, trained
        # at 140x84, then read 112x56). A side that holds a 2:1 frame of max_pixels keeps them up to 2:1.
        side = max(self.factor, math.isqrt(self.max_pixels * WIDEST_ASPECT) // self.factor * self.factor)
        return side, side

    # ---- clips ----
    def clip_segment(self, frames: np.ndarray, t_start: float, t_end: float) -> Segment:
        validate_clip(frames, t_start, t_end)
        view = self.clip_view(frames)  # [F', h, w, 3] uint8, F' a multiple of the temporal patch
        pixels, grid = self.patchify(view)  # [P, C*tps*p*p], (t, h, w)
        n_vis = grid[0] * grid[1] * grid[2] // self.merge_size**2
        text = (
            f"<|im_start|>user\n<t={t_start:.1f}-{t_end:.1f}s><|vision_start|>"
            + "<|video_pad|>" * n_vis
            + "<|vision_end|><|im_end|>\n"
        )
        seg = self.text_segment(text, kind="clip")
        found = int((seg.input_ids == self.video_token_id).sum())
        if found != n_vis:
            raise RuntimeError(f"tokenizer produced {found} video placeholders, expected {n_vis}")
        seg.model_inputs["pixel_values_videos"] = torch.from_numpy(pixels)
        seg.model_inputs["video_grid_thw"] = torch.tensor([grid], dtype=torch.long)
        seconds_per_frame = (t_end - t_start) / frames.shape[0] if t_end > t_start else 1.0
        self.add_time_inputs(seg, seconds_per_frame * self.temporal_patch_size)
        seg.num_visual_tokens = n_vis
        seg.view = view
        return seg

    def change_layout(self) -> ChangeLayout:
        return ChangeLayout(group=self.temporal_patch_size, region=self.factor)

    def picture_tokens(self) -> int:
        # smart_resize keeps h * w <= max_pixels with both sides multiples of the factor, whatever the aspect ratio
        return self.max_pixels // self.factor**2

    def visual_mask(self, segment: Segment) -> torch.Tensor:
        return segment.input_ids[0] == self.video_token_id

    def sparse_clip(self, segment: Segment, keep: np.ndarray) -> Segment:
        """Only the temporal patches with a kept token go through the vision tower (it attends within one
        temporal patch, so their tokens come out as in the whole clip); of those, the kept tokens enter."""
        t, gh, gw = segment.model_inputs["video_grid_thw"][0].tolist()
        per_group = gh * gw // self.merge_size**2
        if keep.shape != (t, gh // self.merge_size, gw // self.merge_size):
            raise ValueError(f"keep mask {keep.shape} does not match the clip's grid {t}x{gh}x{gw}")
        flat = torch.from_numpy(np.ascontiguousarray(keep).reshape(t, per_group))
        groups = flat.any(dim=1).nonzero().squeeze(1)  # temporal patches the tower must see
        visual = segment.input_ids[0] == self.video_token_id
        token_keep = ~visual
        token_keep[visual] = flat.reshape(-1)
        inputs = {"mm_token_type_ids": segment.model_inputs["mm_token_type_ids"][:, token_keep]}
        select = None
        if groups.numel():
            pixels = segment.model_inputs["pixel_values_videos"]
            inputs["pixel_values_videos"] = pixels.view(t, gh * gw, -1)[groups].reshape(-1, pixels.shape[-1])
            inputs["video_grid_thw"] = torch.tensor([[groups.numel(), gh, gw]], dtype=torch.long)
            select = flat[groups].reshape(-1).nonzero().squeeze(1)  # [N_kept] in the tower's output
        if "second_per_grid_ts" in segment.model_inputs:
            inputs["second_per_grid_ts"] = segment.model_inputs["second_per_grid_ts"]
        cells = flat.reshape(-1).nonzero().squeeze(1)
        return sparse_segment(self, segment, token_keep, inputs, select, cells.numel(), cells)

    def add_time_inputs(self, segment: Segment, seconds_per_grid: float) -> None:
        """Hook for Qwen2.5-VL, whose temporal positions follow real time; Qwen2-VL has none."""

    def video_pixels(self, frames: np.ndarray) -> tuple[np.ndarray, tuple[int, int, int]]:
        """[F, H, W, 3] uint8 -> (patches [t*h*w, 3 * tps * p * p] float32, grid (t, h, w) in patches).

        An odd frame count is padded by repeating the last frame (as Qwen's video processor does).
        """
        return self.patchify(self.clip_view(frames))

    def clip_view(self, frames: np.ndarray) -> np.ndarray:
        """[F, H, W, 3] uint8 -> [F', h, w, 3] uint8: resized (aspect kept, sides multiples of 28), an odd
        frame count padded by repeating the last frame (as Qwen's video processor does)."""
        _, height, width, _ = frames.shape
        h, w = smart_resize(height, width, self.factor, self.min_pixels, self.max_pixels)
        x = resize_frames(frames, h, w, self.resample)
        if pad := -x.shape[0] % self.temporal_patch_size:
            x = np.concatenate([x, np.repeat(x[-1:], pad, axis=0)], axis=0)
        return x

    def patchify(self, view: np.ndarray) -> tuple[np.ndarray, tuple[int, int, int]]:
        """[F', h, w, 3] uint8 (see clip_view) -> (patches [t*h*w, 3 * tps * p * p] float32, grid (t, h, w))."""
        _, h, w, _ = view.shape
        x = rescale_normalize(view, self.rescale_factor, self.image_mean, self.image_std)  # [F', 3, h, w]
        p, m, tps = self.patch_size, self.merge_size, self.temporal_patch_size
        gt, gh, gw = x.shape[0] // tps, h // p, w // p
        x = x.reshape(gt, tps, 3, gh // m, m, p, gw // m, m, p)
        # -> (t, h-block, w-block, h-in-block, w-in-block, C, tps, p, p): the order the vision tower expects
        x = x.transpose(0, 3, 6, 4, 7, 2, 1, 5, 8).reshape(gt * gh * gw, 3 * tps * p * p)
        return np.ascontiguousarray(x), (gt, gh, gw)

    # ---- positions and embeddings ----
    def time_interval(self, segment: Segment, video_index: int) -> float | torch.Tensor:
        """Spacing of temporal positions between consecutive temporal patches (1 for Qwen2-VL)."""
        return 1.0

    def segment_position_ids(self, segment: Segment, start: int) -> tuple[torch.Tensor, int]:
        """M-RoPE positions [3, 1, T] (temporal, height, width) of the segment's tokens, and the next free
        position. Follows the installed transformers' `get_rope_index`: text tokens count up on all three
        axes; a video block of grid (t, h, w) gets start + (t_idx * interval, h_idx, w_idx) over its merged
        grid, and the text after it continues at block start + max(h, w) / merge."""
        if segment.positions is not None:
            return sparse_positions(segment, start)
        types = segment.model_inputs["mm_token_type_ids"][0].tolist()
        grids = segment.model_inputs.get("video_grid_thw", torch.zeros(0, 3, dtype=torch.long)).tolist()
        chunks, cur, video_index, i = [], int(start), 0, 0
        while i < len(types):
            j = i
            while j < len(types) and types[j] == types[i]:
                j += 1
            if types[i] == TEXT:
                chunks.append(torch.arange(cur, cur + j - i).expand(3, -1))
                cur += j - i
            else:
                t, h, w = grids[video_index]
                lh, lw = h // self.merge_size, w // self.merge_size
                interval = self.time_interval(segment, video_index)
                tpos = (torch.arange(t) * interval).long()
                grid = torch.meshgrid(tpos, torch.arange(lh), torch.arange(lw), indexing="ij")
                block = torch.stack(grid).reshape(3, -1) + cur
                if block.shape[1] != j - i:
                    raise ValueError(f"video grid {t}x{h}x{w} does not match {j - i} placeholder tokens")
                chunks.append(block)
                cur += max(h, w) // self.merge_size
                video_index += 1
            i = j
        pos = torch.cat(chunks, dim=1) if chunks else torch.zeros(3, 0, dtype=torch.long)
        return pos.view(3, 1, -1), cur

    @torch.no_grad()
    def segment_embeddings(self, model: PreTrainedModel, segment: Segment) -> torch.Tensor:
        device = model.device
        ids = segment.input_ids.to(device)
        embeds = model.get_input_embeddings()(ids)  # [1, T, hidden]
        if "pixel_values_videos" not in segment.model_inputs:
            return embeds
        out = model.get_video_features(
            segment.model_inputs["pixel_values_videos"].to(device),
            segment.model_inputs["video_grid_thw"].to(device),
            return_dict=True,
        )
        feats = torch.cat(out.pooler_output, dim=0).to(embeds.dtype)  # [N_vis, hidden]
        if segment.visual_select is not None:  # a sparse clip: the kept tokens of the patches encoded
            feats = feats[segment.visual_select.to(device)]
        _, video_mask = model.model.get_placeholder_mask(ids, inputs_embeds=embeds, video_features=feats)
        return embeds.masked_scatter(video_mask, feats)


class Qwen25VLAdapter(Qwen2VLAdapter):
    """Qwen2.5-VL: as Qwen2-VL, plus temporal positions spaced by real time
    (tokens_per_second * seconds per temporal patch), given to the model as second_per_grid_ts."""

    family: ClassVar[str] = "qwen2_5_vl"

    def add_time_inputs(self, segment: Segment, seconds_per_grid: float) -> None:
        segment.model_inputs["second_per_grid_ts"] = torch.tensor([seconds_per_grid], dtype=torch.float32)

    def time_interval(self, segment: Segment, video_index: int) -> float | torch.Tensor:
        seconds = segment.model_inputs["second_per_grid_ts"][video_index]
        return float(self.model_config.vision_config.tokens_per_second) * seconds
