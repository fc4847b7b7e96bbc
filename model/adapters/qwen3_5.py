"""Qwen3.5: Qwen3-VL's prompt and positions on a hybrid decoder (Gated DeltaNet + full-attention layers).

Prompt: the same ChatML turns as Qwen3-VL (transformers serves Qwen3.5 with `Qwen3VLProcessor`), one user turn
per clip, one `<t seconds><|vision_start|><|video_pad|> x n<|vision_end|>` block per temporal patch (2 frames).

Positions: as Qwen3-VL's. The installed `Qwen3_5Model.get_rope_index` splits each video grid (t, h, w) into t
grids (1, h, w) and places a block as Qwen2-VL does (text counts up on all three axes; a block of grid (1, h, w)
gets start + (0, h_idx, w_idx), the text after it continues at start + max(h, w) / merge), so the inherited
`segment_position_ids` gives the same positions (tests/model/test_qwen3_5.py checks it on a whole conversation).
Two differences live inside the model and need nothing here: the rotary embedding always interleaves the M-RoPE
axes (Qwen3-VL reads `mrope_interleaved`), and it rotates only `partial_rotary_factor` of each head (0.25 on the
published checkpoints: the rest of a key is position-free).

Vision tower: Qwen3-VL's without DeepStack (`get_video_features` returns only the merged tokens), so a clip's
input embeddings describe it completely and prefill chunks are plain slices of them (`chunk_inputs` is None).

Decoder: 3 of every 4 layers are linear attention (`text_config.layer_types`); their state is a fixed-size
recurrent + convolution state per layer, kept in the cache next to the attention layers' keys and values
(see cache/bounded_cache.py for what eviction does on each kind).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from transformers import PreTrainedModel

from model.adapters.base import Segment
from model.adapters.qwen3_vl import Qwen3VLAdapter


class Qwen35Adapter(Qwen3VLAdapter):
    """Adapter for model_type qwen3_5 (Qwen3.5-0.8B, -2B and alike, natively multimodal)."""

    family: ClassVar[str] = "qwen3_5"

    def chunk_inputs(self, model: PreTrainedModel, segment: Segment) -> Callable[[int, int], dict] | None:
        """No DeepStack: every chunk is its slice of `segment_embeddings`."""
        return None
