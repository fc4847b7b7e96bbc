"""Helpers for the model tests: tiny models built once per process, and synthetic frames.

Tests must not modify the cached models (no training, no attention/dtype changes).
"""

from __future__ import annotations

from functools import cache

import numpy as np
from transformers import PreTrainedModel

from model.adapters.base import VideoAdapter
from model.families import FAMILIES
from model.processor import VisionTextProcessor
from model.tiny import build_tiny

ALL_FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_5", "smolvlm")
QWEN_FAMILIES = ("qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_5")


@cache
def tiny(family: str) -> tuple[PreTrainedModel, VisionTextProcessor, VideoAdapter]:
    """(model, processor, adapter) of the tiny `family` model, seed 0; shared, do not modify."""
    model, processor = build_tiny(family, seed=0)
    adapter = FAMILIES[family].adapter_class(model.config, processor, model.generation_config)
    return model, processor, adapter


def random_frames(n: int, height: int = 48, width: int = 64, seed: int = 0) -> np.ndarray:
    """[n, height, width, 3] uint8 RGB noise."""
    return np.random.default_rng(seed).integers(0, 256, (n, height, width, 3), dtype=np.uint8)


def smooth_frame(height: int = 90, width: int = 120, seed: int = 0) -> np.ndarray:
    """[height, width, 3] uint8 RGB with gradients and a few blocks: a picture resizing changes visibly."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    img = np.stack([x * 255 // max(width - 1, 1), y * 255 // max(height - 1, 1), (x + y) % 256], -1)
    for _ in range(4):
        y0, x0 = rng.integers(0, height // 2), rng.integers(0, width // 2)
        img[y0 : y0 + height // 4, x0 : x0 + width // 4] = rng.integers(0, 256, 3)
    return img.astype(np.uint8)
