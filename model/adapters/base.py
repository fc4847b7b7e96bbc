"""What every model-family adapter offers the streaming session: segments of a growing conversation.

A stream conversation is a list of segments, prefilled one after another into the KV cache:

    conversation_prefix()            system prompt / start marker (may be empty)
    clip_segment(frames, t0, t1)     one user turn per clip: a stream-time marker + the visual tokens
    question_segment(question)       a user turn with the question + the assistant header
    answer_segment(answer_ids)       the decoded answer (stop token dropped) + answer_end_ids(), which closes
                                     the assistant turn, so the answer stays in the conversation
    clip_segment(...) / question_segment(...) ...

`merge_for_generate(segments)` turns the same list into the inputs of a plain `model.generate(**inputs)`
call: the reference the streaming session is checked against.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch
from transformers import GenerationConfig, PreTrainedModel

from model.change import ChangeLayout
from model.processor import VisionTextProcessor


@dataclass
class Segment:
    """The tokens of one piece of the conversation, with the extra forward inputs they need.

    input_ids: [1, T] int64 token ids (visual placeholders included).
    model_inputs: extra kwargs for a forward over exactly these tokens (family-specific: pixel tensors,
        grids, token types); CPU tensors.
    num_visual_tokens: how many of the T tokens are visual placeholders.
    kind: "prefix" | "clip" | "question" | "answer" | "text".
    view: a clip's frames as the model sees them, [F, H, W, 3] uint8 (resized; padded to whole temporal
        groups), for the change tracker (model/change.py); None for other segments.
    A sparse clip (model/sparse_clip.py: unchanged visual tokens left out) also has
    positions: [P, 1, T] positions relative to the segment's start, those its tokens have in the whole clip;
    position_extent: the whole clip's position extent (next start - start);
    visual_select: [N_kept] indices of the kept tokens in the vision tower's output for this segment;
    full_visual_tokens: visual tokens of the whole clip;
    visual_cells: [N_kept] int64, each kept visual token's cell of the whole clip's token grid [G, Rh, Rw] of its
        change layout, flattened (None: a whole clip, every cell in order).
    """

    input_ids: torch.Tensor
    model_inputs: dict[str, torch.Tensor] = field(default_factory=dict)
    num_visual_tokens: int = 0
    kind: str = "text"
    view: np.ndarray | None = None
    positions: torch.Tensor | None = None
    position_extent: int = 0
    visual_select: torch.Tensor | None = None
    full_visual_tokens: int | None = None
    group_starts: list[int] | None = None  # first token of each frame's block (families that drop whole frames)
    visual_cells: torch.Tensor | None = None

    @property
    def num_tokens(self) -> int:
        return int(self.input_ids.shape[1])


def sparse_positions(segment: Segment, start: int) -> tuple[torch.Tensor, int]:
    """Positions of a sparse clip's tokens (those of the whole clip at the same tokens) from `start`."""
    return segment.positions + int(start), int(start) + segment.position_extent


class VideoAdapter(ABC):
    """Prompt layout and frame preprocessing of one model family. Chosen once, at load time."""

    family: ClassVar[str]
    position_dims: ClassVar[int]
    # dim along which each model_inputs key is concatenated when segments are merged
    concat_dims: ClassVar[dict[str, int]] = {}

    def __init__(
        self,
        model_config: Any,
        processor: VisionTextProcessor,
        generation_config: GenerationConfig | None = None,
    ) -> None:
        self.model_config = model_config
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.generation_config = generation_config

    # ---- layout (family-specific) ----
    @abstractmethod
    def frame_size(self) -> tuple[int, int]:
        """(width, height) the capture should resize frames to fit within (aspect ratio kept)."""

    @abstractmethod
    def clip_segment(self, frames: np.ndarray, t_start: float, t_end: float) -> Segment:
        """frames: [F, H, W, 3] uint8 RGB sampled between stream times t_start and t_end (seconds)."""

    @abstractmethod
    def change_layout(self) -> ChangeLayout:
        """How a clip's `view` maps to its visual tokens, for the change tracker."""

    def picture_tokens(self) -> int:
        """The most visual tokens one frame of the change layout (a frame, or a temporal patch) can have: the size of
        the current picture the cache pins (`CacheConfig.pin_picture`). Default: `frame_size()` in regions."""
        width, height = self.frame_size()
        region = self.change_layout().region
        return (width // region) * (height // region)

    @abstractmethod
    def sparse_clip(self, segment: Segment, keep: np.ndarray) -> Segment:
        """The clip `segment` with only the visual tokens `keep` ([G, Rh, Rw] bool over the tokens of its
        change layout) left in, each at the position it has in the whole clip."""

    @abstractmethod
    def visual_mask(self, segment: Segment) -> torch.Tensor:
        """[T] bool: the segment's visual placeholder tokens (those the vision tower's features replace)."""

    def visual_ids(self, segment: Segment, first_frame: int) -> tuple[torch.Tensor, int]:
        """What the cache is told of a segment's tokens: [T, 2] int64, (frame, region) of each visual token,
        (-1, -1) of each text token. Frames (groups of the change layout: a frame, or a temporal patch of
        frames) are numbered from `first_frame`; a region is a token's cell in its frame's grid, row-major.
        Returns (the ids, the first frame id after this segment's frames)."""
        ids = torch.full((segment.num_tokens, 2), -1, dtype=torch.long)
        if segment.view is None:
            return ids, first_frame
        groups = segment.view.shape[0] // self.change_layout().group
        per_group = (segment.full_visual_tokens or segment.num_visual_tokens) // groups
        cells = segment.visual_cells if segment.visual_cells is not None else torch.arange(segment.num_visual_tokens)
        mask = self.visual_mask(segment)
        if int(mask.sum()) != cells.numel():
            raise RuntimeError(f"{int(mask.sum())} visual placeholders for {cells.numel()} visual tokens")
        ids[mask, 0] = first_frame + cells // per_group
        ids[mask, 1] = cells % per_group
        return ids, first_frame + groups

    @abstractmethod
    def question_segment(self, question: str) -> Segment:
        """A user turn holding the question, followed by the assistant header."""

    @abstractmethod
    def answer_end_ids(self) -> torch.Tensor:
        """[1, k] ids that close an assistant turn; appended after the answer (without its stop token)."""

    @abstractmethod
    def conversation_prefix(self) -> Segment:
        """What starts the conversation (system prompt); may have zero tokens."""

    @abstractmethod
    def stop_tokens(self) -> list[str]:
        """Token strings that end an assistant turn in this family's chat format."""

    @abstractmethod
    def segment_embeddings(self, model: PreTrainedModel, segment: Segment) -> torch.Tensor:
        """[1, T, hidden] input embeddings of the segment, visual features scattered in at the placeholders,
        on the model's device and dtype: what the model's own forward would feed its decoder."""

    def segment_position_ids(self, segment: Segment, start: int) -> tuple[torch.Tensor, int]:
        """Positions of the segment's tokens when the next free position is `start`.

        Returns (position_ids, next_start). 1-D RoPE: position_ids [1, T] = start + arange(T).
        M-RoPE adapters return [3, 1, T].
        """
        if segment.positions is not None:
            return sparse_positions(segment, start)
        n = segment.num_tokens
        return torch.arange(start, start + n, dtype=torch.long).unsqueeze(0), start + n

    def answer_segment(self, answer_ids: torch.Tensor) -> Segment:
        """The generated answer [1, k] (stop token excluded) followed by answer_end_ids(): what stays in the
        conversation after an answer."""
        ids = torch.cat([answer_ids.reshape(1, -1).to(torch.long).cpu(), self.answer_end_ids()], dim=1)
        return Segment(input_ids=ids, model_inputs=self.text_model_inputs(ids), kind="answer")

    def decode(self, ids: torch.Tensor | list[int]) -> str:
        """Answer text of generated ids (special tokens dropped)."""
        ids = ids.reshape(-1).tolist() if isinstance(ids, torch.Tensor) else list(ids)
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def chunk_inputs(self, model: PreTrainedModel, segment: Segment) -> Callable[[int, int], dict] | None:
        """When a segment needs more than its input embeddings to be prefilled exactly (Qwen3-VL's DeepStack
        features): a function of a chunk [start, stop) of its tokens giving that chunk's forward inputs.
        None (the default): each chunk is its slice of `segment_embeddings`."""
        return None

    def text_position_ids(self, start: int, length: int = 1) -> torch.Tensor:
        """Positions of `length` plain text tokens from `start` (e.g. decoded tokens): [1, length], or
        [3, 1, length] (the same value on every axis) for M-RoPE."""
        pos = torch.arange(start, start + length, dtype=torch.long).unsqueeze(0)  # [1, length]
        return pos.unsqueeze(0).expand(self.position_dims, 1, length) if self.position_dims > 1 else pos

    # ---- shared helpers ----
    def text_segment(self, text: str, kind: str = "text") -> Segment:
        """Tokenize text (special-token strings allowed, nothing added around it)."""
        ids = self.tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
        ids = ids.to(torch.long).reshape(1, -1)
        return Segment(input_ids=ids, model_inputs=self.text_model_inputs(ids), kind=kind)

    def text_model_inputs(self, input_ids: torch.Tensor) -> dict[str, torch.Tensor]:
        """Extra forward inputs a text-only segment needs (none unless the family says otherwise)."""
        return {}

    @staticmethod
    def check_question(question: str) -> str:
        if not isinstance(question, str) or not question.strip():
            raise ValueError("question must be a non-empty string")
        return question.strip()

    def token_id(self, token: str) -> int:
        """Id of a single special token; ValueError if the tokenizer does not know it."""
        tid = self.tokenizer.convert_tokens_to_ids(token)
        if tid is None or tid == self.tokenizer.unk_token_id:
            raise ValueError(f"tokenizer has no token {token!r}")
        return int(tid)

    @abstractmethod
    def placeholder_tokens(self) -> list[str]:
        """Token strings that mark visual inputs; a generated one would be taken for a visual placeholder."""

    def suppressed_token_ids(self) -> list[int]:
        """Ids decoding must never produce (visual placeholders and their delimiters): mask their logits,
        or pass `suppress_tokens=` to `generate`."""
        return [self.token_id(t) for t in self.placeholder_tokens()]

    def eos_token_ids(self) -> list[int]:
        """Ids that stop decoding: the family's end-of-turn tokens, the tokenizer's eos, the generation
        config's eos ids (deduplicated, in that order)."""
        ids: list[int] = [self.token_id(t) for t in self.stop_tokens()]
        if self.tokenizer.eos_token_id is not None:
            ids.append(int(self.tokenizer.eos_token_id))
        gen_eos = getattr(self.generation_config, "eos_token_id", None)
        if gen_eos is not None:
            ids.extend(int(i) for i in ([gen_eos] if isinstance(gen_eos, int) else gen_eos))
        return list(dict.fromkeys(ids))

    def merge_for_generate(
        self, segments: list[Segment], device: torch.device | str | None = None
    ) -> dict[str, torch.Tensor]:
        """input_ids [1, N], attention_mask [1, N] and the concatenated model inputs of a whole conversation,
        for `model.generate(**inputs)` / `model(**inputs)`."""
        if not segments:
            raise ValueError("merge_for_generate needs at least one segment")
        if any(s.positions is not None for s in segments):
            raise ValueError("a sparse clip has no generate() form: feed its embeddings with its position_ids")
        merged: dict[str, torch.Tensor] = {"input_ids": torch.cat([s.input_ids for s in segments], dim=1)}
        merged["attention_mask"] = torch.ones_like(merged["input_ids"])
        keys = dict.fromkeys(k for s in segments for k in s.model_inputs)
        for key in keys:
            parts = [s.model_inputs[key] for s in segments if key in s.model_inputs]
            merged[key] = torch.cat(parts, dim=self.concat_dims.get(key, 0))
        if device is not None:
            merged = {k: v.to(device) for k, v in merged.items()}
        return merged
