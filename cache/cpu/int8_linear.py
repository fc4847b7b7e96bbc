"""int8 linear layers on the CPU: int8 weights per output channel, each input row quantized with a scale per 64
inputs.

Why a scale per token and group: PyTorch's dynamic int8 (FBGEMM) quantizes a whole input with one 7-bit scale,
and one outlier token spoils every other row: the reference LM's perplexity rose 1.48x (scripts/bench_int8.py).
One scale per row left it 3-6% off over five passages, as a few outlier channels still took a row's range; a
calibrated SmoothQuant rescaling brought that to 0-6%, depending on the calibration text. One scale per 64
inputs of a row keeps an outlier's damage inside its group: 0-1.5% off on the same five passages, with no
calibration.

The product runs in the project's AVX2 kernel (`edge_assistant::int8_linear`, cache/cpu/csrc/int8_linear.cpp),
which reads a packed copy of the int8 weight. Where the kernels are not built, the same integers are multiplied
in fp32 (slower than fp32 itself): the results are the kernel's up to float rounding.

    layer = Int8Linear.from_linear(linear)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from cache.cpu.kernels import kernels_ready

BLOCK_OUTPUTS = 16  # outputs per packed block (the kernel's two AVX registers of 8 sums)
GROUP = 64  # inputs per activation scale (the kernel's kGroup)


def quantize_weight(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[out, in] fp32 -> (int8 [out, in] in [-127, 127], fp32 scale [out]): one scale per output channel."""
    scale = weight.abs().amax(1).clamp(min=1e-12) / 127
    return torch.round(weight / scale[:, None]).clamp(-127, 127).to(torch.int8), scale.float()


def pack(weight_q: torch.Tensor) -> torch.Tensor:
    """int8 [out, in] -> the kernel's flat layout: [out/16][in/4][16][4], outputs padded to 16, inputs to 64."""
    out_features, in_features = weight_q.shape
    padded = F.pad(weight_q, (0, -in_features % GROUP, 0, -out_features % BLOCK_OUTPUTS))
    blocks = padded.reshape(padded.shape[0] // BLOCK_OUTPUTS, BLOCK_OUTPUTS, padded.shape[1] // 4, 4)
    return blocks.permute(0, 2, 1, 3).contiguous().reshape(-1)


def unpack(packed: torch.Tensor, out_features: int, in_features: int) -> torch.Tensor:
    """`pack`'s inverse: the int8 [out, in] weight."""
    rows, columns = out_features + -out_features % BLOCK_OUTPUTS, in_features + -in_features % GROUP
    blocks = packed.reshape(rows // BLOCK_OUTPUTS, columns // 4, BLOCK_OUTPUTS, 4).permute(0, 2, 1, 3)
    return blocks.reshape(rows, columns)[:out_features, :in_features]


def quantize_inputs(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[..., in] -> (integers in [-127, 127] as fp32 [..., groups, 64], scale [..., groups, 1]): what the kernel
    does to each row (zeros pad the last group; a group of zeros gets scale 1)."""
    x = F.pad(x, (0, -x.shape[-1] % GROUP))
    grouped = x.reshape(*x.shape[:-1], x.shape[-1] // GROUP, GROUP)
    peak = grouped.abs().amax(-1, keepdim=True)
    scale = torch.where(peak > 0, peak / 127, torch.ones_like(peak))
    return torch.round(grouped * (1 / scale)).clamp(-127, 127), scale


class Int8Linear(torch.nn.Module):
    """A linear layer with int8 weights and per-token, per-group int8 inputs. Holds only the packed weight (1 byte
    per weight, with the padding); the fp32 weight is dropped."""

    def __init__(self, weight_q: torch.Tensor, weight_scale: torch.Tensor, bias: torch.Tensor | None) -> None:
        super().__init__()
        self.out_features, self.in_features = weight_q.shape
        self.register_buffer("packed", pack(weight_q))
        self.register_buffer("weight_scale", weight_scale.float().contiguous())
        self.register_buffer("bias", None if bias is None else bias.detach().float().contiguous())

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear) -> Int8Linear:
        weight_q, scale = quantize_weight(linear.weight.detach().float())
        return cls(weight_q, scale, linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32 and x.device.type == "cpu" and kernels_ready():
            return torch.ops.edge_assistant.int8_linear(x, self.packed, self.weight_scale, self.bias, self.out_features)
        return self.reference(x)

    def reference(self, x: torch.Tensor) -> torch.Tensor:
        """The kernel's integers multiplied in fp32 per group (exact: 64 products of at most 127 x 127), each
        group's sum scaled and the groups added in order, as the kernel does."""
        dtype = x.dtype
        rows, scale = quantize_inputs(x.float())
        weight = unpack(self.packed, self.out_features, self.in_features).float()
        weight = F.pad(weight, (0, -self.in_features % GROUP))
        weight = weight.reshape(self.out_features, -1, GROUP)  # [out, groups, 64]
        sums = torch.einsum("...gk,ogk->...go", rows, weight) * scale  # [..., groups, out]
        y = sums[..., 0, :]
        for g in range(1, sums.shape[-2]):
            y = y + sums[..., g, :]
        y = y * self.weight_scale
        if self.bias is not None:
            y = y + self.bias
        return y.to(dtype)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, int8 per token and {GROUP} inputs"
