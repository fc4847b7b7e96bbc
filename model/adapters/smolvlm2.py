"""SmolVLM2 (model_type "smolvlm", Idefics3-style): a fixed number of tokens per frame, 1-D RoPE.

Conversation layout (SmolVLM2's chat template, one user turn per clip, frames as in its video prompt):

    <|im_start|>
    User: <t=0.0-4.0s>
    Frame from 00:00:<fake_token_around_image><global-img><image> x S<fake_token_around_image>
    Frame from 00:01:...<end_of_utterance>\\n
    User: What happened?<end_of_utterance>\\nAssistant: ...answer...<end_of_utterance>\\n

Each frame is resized like SmolVLM's video processor (longest edge to the video size, then to the square
the vision encoder takes, max_image_size) and never split into tiles: S = (side // patch / scale)^2
tokens per frame (64 for SmolVLM2-256M/500M: 512 px, patch 16, scale 4; 81 for 2.2B: 384 px,
patch 14, scale 3).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np
import torch
from transformers import GenerationConfig, PreTrainedModel
from transformers.models.smolvlm.image_processing_pil_smolvlm import get_resize_output_image_size

from model.adapters.base import Segment, VideoAdapter
from model.adapters.frames import rescale_normalize, resize_frames, validate_clip
from model.change import ChangeLayout
from model.processor import VisionTextProcessor
from model.sparse_clip import sparse_segment

IMAGE_TOKEN = "<image>"
FRAME_OPEN = "<fake_token_around_image><global-img>"
FRAME_CLOSE = "<fake_token_around_image>"
END_OF_TURN = "<end_of_utterance>"


class SmolVLM2Adapter(VideoAdapter):
    """Adapter for model_type smolvlm (SmolVLM2-256M/500M/2.2B-Video-Instruct and alike)."""

    family: ClassVar[str] = "smolvlm"
    position_dims: ClassVar[int] = 1
    concat_dims: ClassVar[dict[str, int]] = {
        "pixel_values": 1,  # [1, frames, 3, side, side]
        "pixel_attention_mask": 1,  # [1, frames, side, side]
    }

    def __init__(
        self,
        model_config: Any,
        processor: VisionTextProcessor,
        generation_config: GenerationConfig | None = None,
    ) -> None:
        super().__init__(model_config, processor, generation_config)
        ip = processor.image_processor
        self.side = int(ip.max_image_size["longest_edge"])
        sampling = processor.video_settings.get("video_sampling") or {}
        self.video_longest_edge = int((sampling.get("video_size") or {}).get("longest_edge", self.side))
        self.resample = ip.resample
        self.rescale_factor = float(ip.rescale_factor)
        self.image_mean, self.image_std = list(ip.image_mean), list(ip.image_std)
        patch = int(model_config.vision_config.patch_size)
        scale = int(model_config.scale_factor)
        per_side = self.side // patch  # the patch conv drops a remainder (384 / 14 -> 27)
        if per_side % scale:
            raise ValueError(f"{per_side} patches per side do not pixel-shuffle by scale factor {scale}")
        self.tokens_per_frame = (per_side // scale) ** 2
        self.image_token_id = int(model_config.image_token_id)

    # ---- layout ----
    def stop_tokens(self) -> list[str]:
        return [END_OF_TURN]

    def placeholder_tokens(self) -> list[str]:
        return [IMAGE_TOKEN, "<fake_token_around_image>", "<global-img>"]

    def conversation_prefix(self) -> Segment:
        return self.text_segment("<|im_start|>", kind="prefix")

    def question_segment(self, question: str) -> Segment:
        q = self.check_question(question)
        return self.text_segment(f"User: {q}{END_OF_TURN}\nAssistant:", kind="question")

    def answer_end_ids(self) -> torch.Tensor:
        return self.text_segment(f"{END_OF_TURN}\n").input_ids

    def frame_size(self) -> tuple[int, int]:
        return self.video_longest_edge, self.video_longest_edge

    def picture_tokens(self) -> int:
        return self.tokens_per_frame  # every frame is resized to one square

    # ---- clips ----
    def clip_segment(self, frames: np.ndarray, t_start: float, t_end: float) -> Segment:
        validate_clip(frames, t_start, t_end)
        view = self.clip_view(frames)  # [F, side, side, 3] uint8
        pixels = rescale_normalize(view, self.rescale_factor, self.image_mean, self.image_std)  # [F, 3, side, side]
        n = frames.shape[0]
        step = (t_end - t_start) / n
        parts = [f"User: <t={t_start:.1f}-{t_end:.1f}s>"]
        for i in range(n):
            second = int(t_start + i * step)
            parts.append(f"\nFrame from {second // 60:02d}:{second % 60:02d}:")
            parts.append(FRAME_OPEN + IMAGE_TOKEN * self.tokens_per_frame + FRAME_CLOSE)
        parts.append(f"{END_OF_TURN}\n")
        seg = self.text_segment("".join(parts), kind="clip")
        n_vis = n * self.tokens_per_frame
        found = int((seg.input_ids == self.image_token_id).sum())
        if found != n_vis:
            raise RuntimeError(f"tokenizer produced {found} image placeholders, expected {n_vis}")
        seg.model_inputs["pixel_values"] = torch.from_numpy(pixels).unsqueeze(0)
        seg.model_inputs["pixel_attention_mask"] = torch.ones(1, n, self.side, self.side, dtype=torch.bool)
        seg.num_visual_tokens = n_vis
        seg.view = view
        seg.group_starts = self._frame_starts(seg, parts[0])
        return seg

    def _frame_starts(self, segment: Segment, head: str) -> list[int]:
        """First token of each frame's block (its "Frame from" line): right after the previous frame's closing
        token; for the first frame, after the clip's time marker (or at its image tokens' opening, should the
        tokenizer have merged the marker with the line after it)."""
        ids = segment.input_ids[0]
        images = (ids == self.image_token_id).nonzero().squeeze(1).view(-1, self.tokens_per_frame)
        closes = images[:, -1] + 1
        marker = self.text_segment(head).input_ids[0]
        if torch.equal(ids[: marker.numel()], marker):
            first = marker.numel()
        else:
            first = int(images[0, 0]) - self.text_segment(FRAME_OPEN).num_tokens
        return [first] + (closes[:-1] + 1).tolist()

    def visual_mask(self, segment: Segment) -> torch.Tensor:
        return segment.input_ids[0] == self.image_token_id

    def change_layout(self) -> ChangeLayout:
        return ChangeLayout(group=1, region=self.side // math.isqrt(self.tokens_per_frame), whole_groups=True)

    def sparse_clip(self, segment: Segment, keep: np.ndarray) -> Segment:
        """Only the frames with a kept token, whole (1-D positions carry no row or column: a frame's tokens
        are only understood together), each with its "Frame from" line; the others go with theirs."""
        frames = torch.from_numpy(np.ascontiguousarray(keep).reshape(keep.shape[0], -1).any(axis=1))
        ids = segment.input_ids[0]
        if frames.numel() != segment.model_inputs["pixel_values"].shape[1] or segment.group_starts is None:
            raise ValueError(f"keep mask of {frames.numel()} frames does not match the clip")
        closes = (ids == self.image_token_id).nonzero().squeeze(1).view(-1, self.tokens_per_frame)[:, -1] + 1
        token_keep = torch.ones_like(ids, dtype=torch.bool)
        for start, close, kept in zip(segment.group_starts, closes.tolist(), frames.tolist(), strict=True):
            if not kept:
                token_keep[start : close + 1] = False
        inputs = {}
        if frames.any():
            inputs = {k: segment.model_inputs[k][:, frames] for k in ("pixel_values", "pixel_attention_mask")}
        cells = (frames.nonzero() * self.tokens_per_frame + torch.arange(self.tokens_per_frame)).reshape(-1)
        return sparse_segment(self, segment, token_keep, inputs, None, cells.numel(), cells)

    def frame_pixels(self, frames: np.ndarray) -> np.ndarray:
        """[F, H, W, 3] uint8 -> [F, 3, side, side] float32: longest edge to the video size (aspect kept,
        even sides), then to the square side, then rescale + normalize."""
        return rescale_normalize(self.clip_view(frames), self.rescale_factor, self.image_mean, self.image_std)

    def clip_view(self, frames: np.ndarray) -> np.ndarray:
        """[F, H, W, 3] uint8 -> [F, side, side, 3] uint8: the frames as the vision encoder sees them."""
        _, height, width, _ = frames.shape
        shape_only = np.broadcast_to(np.uint8(0), (3, height, width))
        h, w = get_resize_output_image_size(shape_only, resolution_max_side=self.video_longest_edge)
        x = resize_frames(frames, h, w, self.resample)
        return resize_frames(x, self.side, self.side, self.resample)

    # ---- embeddings ----
    @torch.no_grad()
    def segment_embeddings(self, model: PreTrainedModel, segment: Segment) -> torch.Tensor:
        device = model.device
        ids = segment.input_ids.to(device)
        embeds = model.get_input_embeddings()(ids)  # [1, T, hidden]
        if "pixel_values" not in segment.model_inputs:
            return embeds
        out = model.get_image_features(
            pixel_values=segment.model_inputs["pixel_values"].to(device),
            pixel_attention_mask=segment.model_inputs["pixel_attention_mask"].to(device),
            return_dict=True,
        )
        feats = torch.cat(list(out.pooler_output), dim=0).to(embeds.dtype)  # [F * S, hidden]
        mask = model.model.get_placeholder_mask(ids, inputs_embeds=embeds, image_features=feats)
        return embeds.masked_scatter(mask, feats)
