"""Tiny random-weight decoders built in-process for the cache tests (no downloads).

Four architectures: Llama with grouped-query attention (1-D RoPE), Qwen2-VL (3-D M-RoPE), Qwen3-VL
(interleaved M-RoPE, q/k norms) and Qwen3.5 (the hybrid: Gated DeltaNet layers with a recurrent state, every 4th
layer full attention with partial, interleaved M-RoPE), the latter three driven text-only. Each is built once with
the plain `sdpa` attention (the reference) and once with the cache's `bounded_sdpa`, sharing the same weights.
"""

from __future__ import annotations

import copy

import torch
from transformers import (
    LlamaConfig,
    LlamaForCausalLM,
    Qwen2VLConfig,
    Qwen2VLForConditionalGeneration,
    Qwen3_5Config,
    Qwen3_5ForConditionalGeneration,
    Qwen3VLConfig,
    Qwen3VLForConditionalGeneration,
)

from cache.attention import register_attention

VOCAB = 128


def llama_config(layers: int = 2, kv_heads: int = 2) -> LlamaConfig:
    return LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=kv_heads,
        max_position_embeddings=8192,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
    )


def qwen2_vl_config(layers: int = 2, kv_heads: int = 2) -> Qwen2VLConfig:
    return Qwen2VLConfig(
        text_config=dict(
            vocab_size=VOCAB,
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=layers,
            num_attention_heads=4,
            num_key_value_heads=kv_heads,
            max_position_embeddings=8192,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
            bos_token_id=1,
            eos_token_id=2,
            pad_token_id=0,
        ),
        vision_config=dict(depth=1, embed_dim=32, hidden_size=64, num_heads=2, mlp_ratio=2),
        image_token_id=VOCAB - 3,
        video_token_id=VOCAB - 2,
        vision_start_token_id=VOCAB - 1,
    )


def qwen3_vl_config(layers: int = 2, kv_heads: int = 2) -> Qwen3VLConfig:
    """Qwen3-VL's decoder: q/k norms, explicit head_dim, interleaved M-RoPE."""
    rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3], "mrope_interleaved": True}
    return Qwen3VLConfig(
        text_config=dict(
            vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
            num_attention_heads=4, num_key_value_heads=kv_heads, head_dim=16, max_position_embeddings=8192,
            rope_parameters=rope, bos_token_id=1, eos_token_id=2, pad_token_id=0,
        ),
        vision_config=dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
                           deepstack_visual_indexes=[0], num_position_embeddings=16),
        image_token_id=VOCAB - 3, video_token_id=VOCAB - 2, vision_start_token_id=VOCAB - 1,
    )  # fmt: skip


def qwen3_5_config(layers: int = 4, kv_heads: int = 2) -> Qwen3_5Config:
    """Qwen3.5's hybrid decoder: linear attention except every 4th layer (and the last, so that even a short stack
    has keys and values); half of each 16-dim head rotates (sections sum to 16 * 0.5 / 2 = 4)."""
    kinds = ["full_attention" if (i + 1) % 4 == 0 or i == layers - 1 else "linear_attention" for i in range(layers)]
    rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 1, 1], "partial_rotary_factor": 0.5}
    return Qwen3_5Config(
        text_config=dict(
            vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
            num_attention_heads=4, num_key_value_heads=kv_heads, head_dim=16, max_position_embeddings=8192,
            rope_parameters=rope, layer_types=kinds, linear_conv_kernel_dim=4, linear_key_head_dim=16,
            linear_value_head_dim=16, linear_num_key_heads=2, linear_num_value_heads=4,
            bos_token_id=1, eos_token_id=2, pad_token_id=0,
        ),
        vision_config=dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
                           num_position_embeddings=16),
        image_token_id=VOCAB - 3, video_token_id=VOCAB - 2, vision_start_token_id=VOCAB - 1,
    )  # fmt: skip


ARCHITECTURES = {
    "llama-gqa": (llama_config, LlamaForCausalLM, 1),
    "qwen2-vl": (qwen2_vl_config, Qwen2VLForConditionalGeneration, 3),
    "qwen3-vl": (qwen3_vl_config, Qwen3VLForConditionalGeneration, 3),
    "qwen3.5": (qwen3_5_config, Qwen3_5ForConditionalGeneration, 3),
}


def build_pair(arch: str, seed: int = 0, **config_kwargs) -> tuple[torch.nn.Module, torch.nn.Module, int]:
    """(reference model on plain sdpa, same weights on bounded_sdpa, position dims)."""
    make_config, model_class, position_dims = ARCHITECTURES[arch]
    torch.manual_seed(seed)
    reference = model_class(make_config(**config_kwargs)).eval()
    reference.set_attn_implementation("sdpa")
    bounded = copy.deepcopy(reference)
    name = register_attention()
    if arch in ("qwen2-vl", "qwen3-vl", "qwen3.5"):
        bounded.set_attn_implementation({"text_config": name, "vision_config": "sdpa"})
    else:
        bounded.set_attn_implementation(name)
    return reference, bounded, position_dims
