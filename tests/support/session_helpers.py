"""Shared pieces of the session tests: tiny models loaded once, plain generate()."""

from __future__ import annotations

import functools

import torch

from cache.attention import register_attention
from model.config import ModelConfig
from model.loading import LoadedModel, load_model

TINY_FAMILIES = ["tiny-qwen2-vl", "tiny-qwen3-vl", "tiny-qwen3.5", "tiny-smolvlm2"]  # tiny-qwen3.5: the hybrid


@functools.cache
def loaded(name: str, attention: str = "bounded") -> LoadedModel:
    """The tiny model `name` on bounded_sdpa ("bounded") or plain "sdpa" (same weights: same seed)."""
    text_attention = register_attention() if attention == "bounded" else attention
    return load_model(ModelConfig(model=name, device="cpu"), text_attention=text_attention)


def generate_answer(model: LoadedModel, segments, max_new_tokens: int) -> list[int]:
    """Plain transformers: greedy generate() over the whole conversation; the answer without its stop token."""
    adapter = model.adapter
    inputs = adapter.merge_for_generate(segments)
    with torch.inference_mode():
        out = model.model.generate(
            **inputs,
            max_new_tokens=max_new_tokens,
            do_sample=False,
            suppress_tokens=adapter.suppressed_token_ids(),
            eos_token_id=adapter.eos_token_ids(),
            pad_token_id=adapter.eos_token_ids()[0],
        )
    new = out[0, inputs["input_ids"].shape[1] :].tolist()
    stops = set(adapter.eos_token_ids())
    return new[: next((i for i, t in enumerate(new) if t in stops), len(new))]
