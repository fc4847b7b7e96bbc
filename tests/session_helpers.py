"""Shared pieces of the session tests: tiny models loaded once, random clips, plain generate()."""

from __future__ import annotations

import functools

import numpy as np
import torch

from cache.attention import register_attention
from model.config import ModelConfig
from model.loading import LoadedModel, load_model

TINY_FAMILIES = ["tiny-qwen2-vl", "tiny-smolvlm2"]


@functools.cache
def loaded(name: str, attention: str = "bounded") -> LoadedModel:
    """The tiny model `name` on bounded_sdpa ("bounded") or plain "sdpa" (same weights: same seed)."""
    text_attention = register_attention() if attention == "bounded" else attention
    return load_model(ModelConfig(model=name, device="cpu"), text_attention=text_attention)


def random_clip(frames: int = 4, height: int = 48, width: int = 64, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (frames, height, width, 3), dtype=np.uint8)


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
