"""The int8 kernel computes what per-token, per-group int8 means, on every path through it; the layer stays close
to fp32, and a scale per group of 64 inputs is what keeps an outlier channel from spoiling its row.

The reference is the definition written out (each group of 64 inputs of a row rounded to [-127, 127] with its own
scale, each weight row with its own, the integers multiplied exactly in float64), not the kernel's own output.
The shapes reach the kernel's branches: row counts that leave 1, 2 or 3 rows after the blocks of four, output
counts that are not a multiple of 16 and input counts that are not a multiple of 64 (the packing's padding), a
zero row, extra batch dimensions, and a layer big enough to be split between two threads.
"""


import pytest
import torch

from cache.cpu.int8_linear import GROUP, Int8Linear, pack, quantize_weight, unpack

pytestmark = pytest.mark.usefixtures("cpu_kernels_built")


def _definition(x: torch.Tensor, weight: torch.Tensor, bias) -> torch.Tensor:
    """Per-token, per-group int8 written from the definition: the rounding in fp32 as the layer does it (scale =
    group peak / 127, x times 1 / scale rounded half to even; a tie decided differently in float64 would move a
    whole group), the products and the scaling in float64."""
    w_scale = weight.abs().amax(1) / 127
    w_q = torch.round(weight / w_scale[:, None]).clamp(-127, 127).double()
    y = torch.zeros(*x.shape[:-1], weight.shape[0], dtype=torch.float64)
    for start in range(0, x.shape[-1], GROUP):
        group = x[..., start : start + GROUP]
        peak = group.abs().amax(-1, keepdim=True)
        scale = torch.where(peak > 0, peak / 127, torch.ones_like(peak))
        q = torch.round(group * (1 / scale)).clamp(-127, 127).double()
        y += (q @ w_q[:, start : start + GROUP].t()) * scale.double()
    y = y * w_scale.double()
    return y if bias is None else y + bias.double()


@pytest.mark.parametrize(
    ("rows", "in_features", "out_features"),
    [(1, 64, 16), (2, 36, 40), (3, 130, 7), (5, 257, 33), (7, 1536, 256), (12, 80, 48), (4, 8960, 20)],
)
def test_kernel_matches_the_definition(rows, in_features, out_features):
    torch.manual_seed(rows * 1000 + in_features)
    linear = torch.nn.Linear(in_features, out_features)
    layer = Int8Linear.from_linear(linear)
    x = torch.randn(rows, in_features) * torch.rand(in_features) * 4
    expected = _definition(x, linear.weight.detach(), linear.bias.detach())
    torch.testing.assert_close(layer(x).double(), expected, atol=1e-5, rtol=1e-5)
    # the fallback (no kernel) computes the same integers
    torch.testing.assert_close(layer.reference(x).double(), expected, atol=1e-5, rtol=1e-5)


def test_batch_dimensions_zero_rows_and_no_bias():
    torch.manual_seed(1)
    linear = torch.nn.Linear(1030, 301, bias=False)
    x = torch.randn(2, 9, 1030)
    x[0, 3] = 0  # a zero row: every group's scale 1, every product 0
    layer = Int8Linear.from_linear(linear)
    y = layer(x)
    assert y.shape == (2, 9, 301)
    assert torch.equal(y[0, 3], torch.zeros(301))
    torch.testing.assert_close(y.double(), _definition(x, linear.weight.detach(), None), atol=1e-5, rtol=1e-5)


def test_two_threads_split_a_large_layer_as_one_does(two_threads):
    torch.manual_seed(2)
    layer = Int8Linear.from_linear(torch.nn.Linear(512, 1000))
    x = torch.randn(37, 512)
    together = layer(x)
    torch.set_num_threads(1)
    assert torch.equal(layer(x), together)


def test_int8_stays_close_to_fp32_and_an_outlier_channel_spoils_only_its_group():
    """The quantization error is small against the output's size. With an outlier channel 100x the others, one
    scale for the whole row would leave the other channels a few levels each; a scale per group keeps them
    exact but for the outlier's group, so the error stays small."""
    torch.manual_seed(3)
    linear = torch.nn.Linear(768, 256, bias=False)
    layer = Int8Linear.from_linear(linear)
    x = torch.randn(64, 768)
    exact = linear(x).detach()
    assert ((layer(x) - exact).norm() / exact.norm()).item() < 0.02
    x[:, 10] *= 100
    exact = linear(x).detach()
    error = ((layer(x) - exact).norm() / exact.norm()).item()
    # the same rows with one scale per row: every channel rounded on the outlier's scale
    scale = x.abs().amax(-1, keepdim=True) / 127
    weight = unpack(layer.packed, 256, 768).float() * layer.weight_scale[:, None]
    per_row = (torch.round(x / scale) * scale) @ weight.t()
    error_per_row = ((per_row - exact).norm() / exact.norm()).item()
    assert error < 0.02 and error < error_per_row / 2


def test_packing_puts_four_inputs_of_each_output_together():
    weight_q = torch.arange(20 * 6, dtype=torch.int32).reshape(20, 6).remainder(127).to(torch.int8)
    packed = pack(weight_q)
    assert packed.numel() == 32 * 64  # 20 outputs -> 32, 6 inputs -> 64
    assert torch.equal(unpack(packed, 20, 6), weight_q)
    blocks = packed.reshape(2, 16, 16, 4)  # [output block][inputs / 4][output][input]
    assert torch.equal(blocks[0, 1, 3, :2], weight_q[3, 4:6])
    assert torch.equal(blocks[1, 0, 3], weight_q[19, 0:4])
    assert torch.equal(blocks[0, 1, 3, 2:], torch.zeros(2, dtype=torch.int8))  # padded inputs are 0
    assert torch.equal(blocks[1, 0, 4], torch.zeros(4, dtype=torch.int8))  # padded outputs are 0


def test_weights_use_the_symmetric_range():
    weight = torch.tensor([[1.0, -2.0, 0.5], [0.0, 0.0, 0.0]])
    weight_q, scale = quantize_weight(weight)
    assert weight_q.tolist()[0] == [64, -127, 32]  # 1 / (2 / 127) = 63.5 rounds to even
    assert weight_q.abs().max() <= 127 and torch.all(scale > 0)
