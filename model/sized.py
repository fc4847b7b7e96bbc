"""Random-weight Qwen2-VL models of real size classes, for benchmarks (timings and memory, not answers).

They use the tiny tokenizer (its ~500-token vocabulary: the output layer is far smaller than a real
model's 151,936 rows, which the README's benchmark notes say) and the real layer shapes otherwise.
"""

from __future__ import annotations

import torch
from transformers import GenerationConfig, Qwen2VLConfig, Qwen2VLForConditionalGeneration

from model.families import FAMILIES
from model.loading import LoadedModel, attention_implementation
from model.tiny import _qwen_processor, _qwen_token_ids

SIZE_CLASSES = {
    # Qwen2-VL-2B-Instruct's decoder and vision tower
    "qwen2-vl-2b": dict(
        text=dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                  num_key_value_heads=2, mrope=[16, 24, 24]),
        vision=dict(depth=32, embed_dim=1280, num_heads=16, mlp_ratio=4),
        max_pixels=448 * 448,
    ),
    # a CPU-sized stand-in: same structure (GQA 4:1, M-RoPE, merged 2x2 patches), ~30M parameters
    "small": dict(
        text=dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=8, num_attention_heads=8,
                  num_key_value_heads=2, mrope=[8, 12, 12]),
        vision=dict(depth=4, embed_dim=256, num_heads=4, mlp_ratio=2),
        max_pixels=224 * 224,
    ),
}  # fmt: skip


def build_sized_qwen2_vl(
    size: str, text_attention: str, device: str = "cpu", dtype: torch.dtype = torch.float32, seed: int = 0
) -> LoadedModel:
    """A random Qwen2-VL of `size` (see SIZE_CLASSES), ready for a StreamingSession."""
    spec = SIZE_CLASSES[size]
    processor = _qwen_processor(min_pixels=56 * 56, max_pixels=spec["max_pixels"])
    tok = processor.tokenizer
    text = dict(spec["text"])
    rope = {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": text.pop("mrope")}
    config = Qwen2VLConfig(
        text_config=dict(text, vocab_size=512, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                         rope_parameters=rope, max_position_embeddings=32768),
        vision_config=dict(spec["vision"], hidden_size=text["hidden_size"], patch_size=14, spatial_merge_size=2,
                           temporal_patch_size=2),
        **_qwen_token_ids(tok),
    )  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2VLForConditionalGeneration(config)
    model.set_attn_implementation(attention_implementation(text_attention))
    model.to(device=device, dtype=dtype).eval()
    model.generation_config = GenerationConfig(eos_token_id=[tok.eos_token_id], pad_token_id=tok.pad_token_id)
    adapter = FAMILIES["qwen2_vl"].adapter_class(model.config, processor, model.generation_config)
    return LoadedModel(model, processor, adapter, torch.device(device), dtype, f"random {size}", "qwen2_vl")
