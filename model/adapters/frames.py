"""Frame checks and pixel preprocessing shared by the adapters, with PIL + numpy only (no torchvision).

The steps and their numerics follow transformers' PIL image processors: PIL resize of the uint8 RGB frame,
rescale in float64 then cast to float32, normalize with float32 mean/std.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from PIL import Image


def validate_clip(frames: np.ndarray, t_start: float, t_end: float) -> None:
    """ValueError unless frames is a non-empty uint8 RGB array [F, H, W, 3] and 0 <= t_start <= t_end."""
    if not isinstance(frames, np.ndarray):
        raise ValueError(f"frames must be a numpy array [F, H, W, 3] uint8 RGB; got {type(frames).__name__}")
    if frames.ndim != 4 or frames.shape[-1] != 3:
        raise ValueError(f"frames must have shape [F, H, W, 3] (RGB); got shape {tuple(frames.shape)}")
    if frames.shape[0] == 0:
        raise ValueError("empty clip: frames has 0 frames")
    if frames.shape[1] < 2 or frames.shape[2] < 2:
        raise ValueError(f"frames are too small to encode: {frames.shape[2]}x{frames.shape[1]} pixels")
    if frames.dtype != np.uint8:
        raise ValueError(f"frames must be uint8 RGB (0..255); got dtype {frames.dtype}")
    if not (np.isfinite(t_start) and np.isfinite(t_end)) or t_start < 0 or t_end < t_start:
        raise ValueError(f"clip times must satisfy 0 <= t_start <= t_end; got t_start={t_start}, t_end={t_end}")


def resize_frames(frames: np.ndarray, height: int, width: int, resample: int) -> np.ndarray:
    """PIL-resize every frame: [F, H, W, 3] uint8 -> [F, height, width, 3] uint8."""
    if frames.shape[1] == height and frames.shape[2] == width:
        return frames
    out = [np.asarray(Image.fromarray(f).resize((width, height), resample=int(resample))) for f in frames]
    return np.stack(out)


def rescale_normalize(
    frames: np.ndarray,
    rescale_factor: float,
    mean: Sequence[float],
    std: Sequence[float],
) -> np.ndarray:
    """[F, H, W, 3] uint8 -> [F, 3, H, W] float32: x * rescale_factor, then (x - mean) / std per channel."""
    x = (frames.astype(np.float64) * rescale_factor).astype(np.float32)
    x = (x - np.asarray(mean, dtype=np.float32)) / np.asarray(std, dtype=np.float32)
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))
