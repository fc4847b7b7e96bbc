"""int8 linear layers on the CPU: int8 weights per output channel, each input row quantized with its own scale.

Why per token: PyTorch's dynamic int8 (FBGEMM) quantizes a whole input with one 7-bit scale, and one outlier
token spoils every other row: the reference LM's perplexity rose 1.48x (scripts/bench_int8.py). With a scale
per row and per output channel, and SmoothQuant's rescaling of the input channels (an input channel's range
moved into the weight's column, `s = a^alpha / w^(1 - alpha)`, `a` calibrated), it rose 1.005x.

The product runs in the project's AVX2 kernel (`edge_assistant::int8_linear`, cache/cpu/csrc/int8_linear.cpp),
which reads a packed copy of the int8 weight. Where the kernels are not built, the same integers are multiplied
in fp32 (exact for these widths, slower than fp32 itself): the results are those of the kernel up to float
rounding of the final scaling.

    layer = Int8Linear.from_linear(linear)                            # no calibration
    layer = Int8Linear.from_linear(linear, smoothing(w, input_peak))  # SmoothQuant, `input_peak` from calibration
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from cache.cpu.kernels import kernels_ready

BLOCK_OUTPUTS = 16  # outputs per packed block (the kernel's two AVX registers of 8 int32 sums)
SMOOTH_ALPHA = 0.65  # SmoothQuant's migration strength: 0.65 was the best of 0.5, 0.65, 0.8 on the reference LM


def quantize_weight(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[out, in] fp32 -> (int8 [out, in] in [-127, 127], fp32 scale [out]): one scale per output channel."""
    scale = weight.abs().amax(1).clamp(min=1e-12) / 127
    return torch.round(weight / scale[:, None]).clamp(-127, 127).to(torch.int8), scale.float()


def pack(weight_q: torch.Tensor) -> torch.Tensor:
    """int8 [out, in] -> the kernel's flat layout: [out/16][in/4][16][4], outputs padded to 16, inputs to 4."""
    out_features, in_features = weight_q.shape
    rows = -out_features % BLOCK_OUTPUTS
    columns = -in_features % 4
    padded = F.pad(weight_q, (0, columns, 0, rows))
    blocks = padded.reshape(padded.shape[0] // BLOCK_OUTPUTS, BLOCK_OUTPUTS, padded.shape[1] // 4, 4)
    return blocks.permute(0, 2, 1, 3).contiguous().reshape(-1)


def smoothing(weight: torch.Tensor, input_peak: torch.Tensor, alpha: float = SMOOTH_ALPHA) -> torch.Tensor:
    """SmoothQuant's factor per input channel: inputs are divided by it, the weight's columns multiplied.
    input_peak: the channel's largest |input| over a calibration pass."""
    columns = weight.abs().amax(0).clamp(min=1e-5)
    return (input_peak.float().clamp(min=1e-5).pow(alpha) / columns.pow(1 - alpha)).clamp(min=1e-5)


def quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[..., in] -> (integers in [-127, 127] as fp32, scale [..., 1]): what the kernel does to each row."""
    peak = x.abs().amax(-1, keepdim=True)
    scale = torch.where(peak > 0, peak / 127, torch.ones_like(peak))
    return torch.round(x * (1 / scale)).clamp(-127, 127), scale


class Int8Linear(torch.nn.Module):
    """A linear layer with int8 weights and per-token int8 inputs. Holds the packed weight for the kernel and the
    plain int8 weight for the fallback (1 byte per weight each; the fp32 weight is dropped)."""

    def __init__(self, weight_q: torch.Tensor, weight_scale: torch.Tensor, bias: torch.Tensor | None,
                 inverse_smoothing: torch.Tensor | None = None) -> None:  # fmt: skip
        super().__init__()
        self.out_features, self.in_features = weight_q.shape
        self.register_buffer("weight_q", weight_q)
        self.register_buffer("packed", pack(weight_q))
        self.register_buffer("weight_scale", weight_scale.float().contiguous())
        self.register_buffer("inverse_smoothing", None if inverse_smoothing is None else inverse_smoothing.float())
        self.register_buffer("bias", None if bias is None else bias.detach().float().contiguous())

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear, factor: torch.Tensor | None = None) -> Int8Linear:
        """linear's weight (times `factor` per input channel: SmoothQuant's) in int8; inputs divided by factor."""
        weight = linear.weight.detach().float()
        if factor is not None:
            weight = weight * factor
        weight_q, scale = quantize_weight(weight)
        inverse = None if factor is None else (1.0 / factor).contiguous()
        return cls(weight_q, scale, linear.bias, inverse)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype == torch.float32 and x.device.type == "cpu" and kernels_ready():
            return torch.ops.edge_assistant.int8_linear(
                x, self.packed, self.weight_scale, self.inverse_smoothing, self.bias, self.out_features
            )
        return self.reference(x)

    def reference(self, x: torch.Tensor) -> torch.Tensor:
        """The kernel's integers multiplied in fp32, then scaled in the kernel's order: the kernel's result bit for
        bit while every sum stays under 2^24 (up to 1,040 inputs), within float rounding beyond."""
        dtype = x.dtype
        x = x.float()
        if self.inverse_smoothing is not None:
            x = x * self.inverse_smoothing
        rows, scale = quantize_rows(x)
        y = (rows @ self.weight_q.t().float()) * scale * self.weight_scale
        if self.bias is not None:
            y = y + self.bias
        return y.to(dtype)

    def extra_repr(self) -> str:
        smoothed = ", smoothed" if self.inverse_smoothing is not None else ""
        return f"in_features={self.in_features}, out_features={self.out_features}, int8 per token{smoothed}"
