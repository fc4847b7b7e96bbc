"""Integer compression of archived KV, as KIVI does it: keys per channel, values per token.

Keys have a few channels with large magnitudes (the same ones for every token), so each channel gets its own
range over a block's tokens; values have no such channels and are quantised per token. Asymmetric: each group
keeps its minimum and step (float16), the codes are unsigned `bits`-bit integers, two per byte for int4.

    packed = quantize(keys, bits=8, group_dim=2)     # keys [L, H, T, D]: one range per channel over the T tokens
    keys_again = dequantize(packed, torch.float32)
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

QUANT_MODES = {"none": None, "int8": 8, "int4": 4}


@dataclass
class Quantized:
    codes: torch.Tensor  # uint8; for 4 bits two codes per byte along the last dimension
    step: torch.Tensor  # float16, size 1 along the grouped dimension
    low: torch.Tensor  # float16
    bits: int

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.codes, self.step, self.low))

    def to_dict(self) -> dict[str, torch.Tensor]:
        return {"codes": self.codes, "step": self.step, "low": self.low, "bits": torch.tensor(self.bits)}

    @classmethod
    def from_dict(cls, d: dict[str, torch.Tensor]) -> Quantized:
        return cls(d["codes"], d["step"], d["low"], int(d["bits"]))


def quantize(x: torch.Tensor, bits: int, group_dim: int) -> Quantized:
    """Codes for `x`, one (minimum, step) pair per slice along `group_dim`. 4 bits needs an even last dim."""
    if bits not in (4, 8):
        raise ValueError(f"bits must be 4 or 8, got {bits}")
    if bits == 4 and x.shape[-1] % 2:
        raise ValueError(f"int4 packs pairs along the last dimension, which has odd size {x.shape[-1]}")
    x = x.float()
    levels = 2**bits - 1
    low = x.amin(dim=group_dim, keepdim=True).half()
    high = x.amax(dim=group_dim, keepdim=True)
    step = ((high - low.float()) / levels).clamp_min(1e-6).half()
    codes = ((x - low.float()) / step.float()).round().clamp(0, levels).to(torch.uint8)
    if bits == 4:
        codes = codes[..., 0::2] | (codes[..., 1::2] << 4)
    return Quantized(codes.contiguous(), step, low, bits)


def dequantize(q: Quantized, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    codes = q.codes
    if q.bits == 4:
        codes = torch.stack([codes & 0xF, codes >> 4], dim=-1).flatten(-2)
    return (codes.float() * q.step.float() + q.low.float()).to(dtype)
