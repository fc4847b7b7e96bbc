"""Weight memory layouts that make single-token decoding read faster on a CPU.

A decode step multiplies one row by every weight matrix, so it streams the model's weights from memory.
How fast a CPU BLAS streams a `[out, in]` weight depends on its layout: on the 2-core AVX2 machine of the
README, `x @ W.T` read the 49152 x 576 tied LM head of SmolLM2 at 13 GB/s when W is row-major and at 24 GB/s
when it is stored column-major (the same matrix, `W.t().contiguous().t()`), while `down_proj` was faster
row-major. So each distinct weight shape is timed both ways once and stored the faster way. Values, shapes
and module code stay as they are: only strides change (results differ by float rounding at most).
"""

from __future__ import annotations

import logging
import time

import torch

logger = logging.getLogger(__name__)

_STREAM_BYTES = 64 * 2**20  # time over this many bytes of copies, so that caches do not hold them


def tune_linear_layouts(model: torch.nn.Module, rounds: int = 5) -> dict[tuple[int, int], bool]:
    """Stores each CPU `nn.Linear` weight column-major where one-row products measured faster that way.

    Returns {(out, in): column_major} per weight shape tried. Tied weights (an LM head shared with the
    embedding) change for both users, which index and multiply strided weights alike.
    """
    choices: dict[tuple[int, int], bool] = {}
    with torch.no_grad():
        for module in model.modules():
            if not isinstance(module, torch.nn.Linear) or module.weight.device.type != "cpu":
                continue
            weight = module.weight
            shape = tuple(weight.shape)
            if shape not in choices:
                choices[shape] = _column_major_is_faster(weight, rounds)
            if choices[shape] and weight.is_contiguous():
                weight.data = weight.data.t().contiguous().t()
    logger.info("weights stored column-major for shapes %s", [s for s, c in choices.items() if c])
    return choices


def _column_major_is_faster(weight: torch.Tensor, rounds: int) -> bool:
    row_bytes = weight.shape[1] * weight.element_size()
    sample = weight.detach()[: max(1, _STREAM_BYTES // row_bytes)]  # a large LM head is timed on its first rows
    copies = max(1, _STREAM_BYTES // (sample.numel() * sample.element_size()))
    row_major = [sample.clone() for _ in range(copies)]
    column_major = [w.t().contiguous().t() for w in row_major]
    x = torch.randn(1, weight.shape[1], dtype=weight.dtype)
    return _best_seconds(x, column_major, rounds) < _best_seconds(x, row_major, rounds)


def _best_seconds(x: torch.Tensor, weights: list[torch.Tensor], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for w in weights:
            torch.nn.functional.linear(x, w)
        best = min(best, time.perf_counter() - started)
    return best
