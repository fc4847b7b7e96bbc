"""`--quantize int8`: the model's linear layers with int8 weights and int8 products, on the CPU.

Every `nn.Linear` of the language model and the vision tower (the LM head included) becomes an `Int8Linear`
(cache.cpu.int8_linear: weights per output channel, inputs per token and group of 64): weights 4x smaller, a
decode step's weight reads 4x fewer bytes, and the products run in the project's AVX2 int8 kernel. No
calibration is needed. Kept in fp32: the projections of a hybrid model's recurrent layers (Qwen3.5's gated
delta net, `linear_attn`): an error there enters a state that every later token reads, and on the tiny
Qwen3.5 quantizing them moved the logits 25% against 4% without them.

scripts/bench_int8.py measures the speed on the Qwen2-VL-2B shapes and the quality on the reference LM; the
VLMs' own quality is not measured (no real VLM weights here).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from cache.cpu.int8_linear import Int8Linear

SPARED = (".linear_attn.",)  # parts of a layer's qualified name that keep it in fp32: recurrent layers


@dataclass(frozen=True)
class QuantizeReport:
    layers: int  # linear layers replaced
    kept: int  # linear layers kept in fp32 (SPARED)
    weight_bytes_before: int
    weight_bytes_after: int
    seconds: float

    def describe(self) -> str:
        kept = f" ({self.kept} of a recurrent layer kept in fp32)" if self.kept else ""
        return (
            f"int8: {self.layers} linear layers{kept}, their weights {self.weight_bytes_before / 2**20:.1f} -> "
            f"{self.weight_bytes_after / 2**20:.1f} MiB ({self.seconds:.1f} s)"
        )


def quantize_model(model: torch.nn.Module) -> QuantizeReport:
    """Replaces every `nn.Linear` (subclasses included) but the SPARED by an `Int8Linear`. A tied LM head keeps
    its embedding (the lookup needs it): only the head's product becomes int8."""
    started = time.perf_counter()
    every = [(n, m) for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)]
    linears = [(n, m) for n, m in every if not any(part in f".{n}." for part in SPARED)]
    before = sum(m.weight.numel() * m.weight.element_size() for _, m in linears)
    for name, linear in linears:
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, Int8Linear.from_linear(linear))
    after = sum(m.packed.numel() for m in model.modules() if isinstance(m, Int8Linear))
    return QuantizeReport(len(linears), len(every) - len(linears), before, after, time.perf_counter() - started)
