"""How each weight is multiplied by one row, picked by timing, so that single-token decoding reads faster on a CPU.

A decode step multiplies one row by every weight matrix, so it streams the model's weights from memory.
How fast that goes depends on the weight's shape and how it is multiplied. On the 2-core AMD machine of the
README, MKL's `x @ W.T` read the 49152 x 576 tied LM head of SmolLM2 at 13 GB/s when W is row-major and at
24 GB/s when it is stored column-major (the same matrix, `W.t().contiguous().t()`), while the 576-wide
attention projections read at 11-13 GB/s either way and at 17-19 GB/s with the AVX2 kernel of
`cache.cpu.kernels` (one dot product per weight row). So each distinct weight shape of 1 MiB or more is timed three ways
once (a smaller one takes the kernel when it is built, MKL as loaded otherwise):
- "row": MKL, the weight as loaded;
- "column": MKL, the weight stored column-major;
- "kernel": the one-row kernel, the weight as loaded (only where `kernels_ready()`), for which the module
  becomes a `OneRowLinear`: an `nn.Linear` whose one-row products call the kernel.
Values and shapes stay as they are (results differ by float rounding at most).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import torch

from cache.cpu.kernels import fits, kernels_ready

logger = logging.getLogger(__name__)

_STREAM_BYTES = 64 * 2**20  # time over this many bytes of weights, so that caches do not hold them
# A weight under this size is not timed: it sits in the L2 cache, its product takes microseconds whatever its
# layout, and timing it would measure call overhead over thousands of copies (8.5 of a tiny model's 29 s start).
UNTIMED_BYTES = 2**20


KERNEL_ROWS = 16  # rows a product hands to the kernel: a decode step of up to this many streams (cache.batch_decode)


class OneRowLinear(torch.nn.Linear):
    """An `nn.Linear` whose products of one row (or up to `KERNEL_ROWS`: a batched decode step, each row as it
    is alone) on the CPU run `edge_assistant::one_row_linear`; longer prompts go to MKL."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.numel() // max(x.shape[-1], 1)
        if 0 < rows <= KERNEL_ROWS and fits(x, self.weight) and self.weight.is_contiguous() and kernels_ready():
            return torch.ops.edge_assistant.one_row_linear(x, self.weight, self.bias)
        return super().forward(x)


def tune_linear_layouts(model: torch.nn.Module, rounds: int = 5) -> dict[tuple[int, int], str]:
    """Gives each CPU fp32 `nn.Linear` the fastest one-row product measured for its weight shape.

    Returns {(out, in): "row" | "column" | "kernel"} per weight shape tried. Tied weights (an LM head shared
    with the embedding) change for both users, which index and multiply strided weights alike. Tuning again
    (say, after `use_cpu_kernels(False)`) undoes what the previous tuning chose where it chooses otherwise.
    """
    choices: dict[tuple[int, int], str] = {}
    with torch.no_grad():
        for module in model.modules():
            if type(module) not in (torch.nn.Linear, OneRowLinear) or not fits(module.weight):
                continue
            weight = module.weight
            shape = tuple(weight.shape)
            if shape not in choices:
                choices[shape] = _fastest(weight, rounds)
            choice = choices[shape]
            if choice == "column" and weight.is_contiguous():
                weight.data = weight.data.t().contiguous().t()
            elif choice != "column" and not weight.is_contiguous():  # tuned before, another way
                weight.data = weight.data.contiguous()
            if "forward" not in module.__dict__:  # a hook's saved forward (accelerate) would bypass the class
                module.__class__ = OneRowLinear if choice == "kernel" else torch.nn.Linear
    logger.info("one-row products per weight shape: %s", choices)
    return choices


def _fastest(weight: torch.Tensor, rounds: int) -> str:
    if weight.numel() * weight.element_size() < UNTIMED_BYTES:  # the kernel when built: it is what decode runs
        return "kernel" if kernels_ready() else "row"
    row_bytes = weight.shape[1] * weight.element_size()
    sample = weight.detach()[: max(1, _STREAM_BYTES // row_bytes)]  # a large LM head is timed on its first rows
    copies = max(1, _STREAM_BYTES // (sample.numel() * sample.element_size()))
    row_major = [sample.clone(memory_format=torch.contiguous_format) for _ in range(copies)]
    x = torch.randn(1, weight.shape[1], dtype=weight.dtype)
    mkl = torch.nn.functional.linear
    seconds = {
        "row": _best_seconds(lambda w: mkl(x, w), row_major, rounds),
        "column": _best_seconds(lambda w: mkl(x, w), [w.t().contiguous().t() for w in row_major], rounds),
    }
    if kernels_ready():
        kernel = torch.ops.edge_assistant.one_row_linear
        seconds["kernel"] = _best_seconds(lambda w: kernel(x, w, None), row_major, rounds)
    return min(seconds, key=seconds.get)


def _best_seconds(product: Callable[[torch.Tensor], torch.Tensor], weights: list[torch.Tensor], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for w in weights:
            product(w)
        best = min(best, time.perf_counter() - started)
    return best
