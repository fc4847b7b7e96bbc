"""The int8 kernel computes what per-token int8 means, on every path through it; the layer stays close to fp32.

The reference is the definition written out in float64 (each row rounded to [-127, 127] with its own scale,
each weight row with its own, the integers multiplied exactly), not the kernel's own output. The shapes reach
the kernel's branches: row counts that leave 1, 2 or 3 rows after the blocks of four, output counts that are not
a multiple of 16 and input counts that are not a multiple of 4 (the packing's padding), a zero row, extra batch
dimensions, SmoothQuant's factors, and a layer big enough to be split between two threads.
"""

import os

import pytest
import torch

from cache.cpu import kernels as cpu_kernels
from cache.cpu.int8_linear import Int8Linear, pack, quantize_weight, smoothing


@pytest.fixture(scope="module", autouse=True)
def kernels():
    if not cpu_kernels.kernels_ready():
        if os.environ.get("EDGE_ASSISTANT_REQUIRE_TOOLS") == "1":
            pytest.fail("the CPU kernels did not build (see the log for the compiler's message)")
        pytest.skip("the CPU kernels are not available here")


def _definition(x: torch.Tensor, weight: torch.Tensor, bias, factor=None) -> torch.Tensor:
    """Per-token int8 written from the definition: the rounding in fp32 as the layer does it (scale = peak / 127,
    x times 1 / scale rounded half to even; a tie decided differently in float64 moves a whole row), the
    product and the scaling in float64."""
    if factor is not None:
        x, weight = x * (1 / factor), weight * factor
    w_scale = weight.abs().amax(1) / 127
    w_q = torch.round(weight / w_scale[:, None]).clamp(-127, 127)
    x_peak = x.abs().amax(-1, keepdim=True)
    x_scale = torch.where(x_peak > 0, x_peak / 127, torch.ones_like(x_peak))
    x_q = torch.round(x * (1 / x_scale)).clamp(-127, 127)
    y = (x_q.double() @ w_q.double().t()) * x_scale.double() * w_scale.double()
    return y if bias is None else y + bias.double()


@pytest.mark.parametrize(
    ("rows", "in_features", "out_features"),
    [(1, 64, 16), (2, 36, 40), (3, 130, 7), (5, 257, 33), (7, 1536, 256), (12, 80, 48)],
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


def test_smoothing_batch_dimensions_zero_rows_and_no_bias(two_threads):
    torch.manual_seed(1)
    linear = torch.nn.Linear(1030, 301, bias=False)
    x = torch.randn(2, 9, 1030)
    x[0, 3] = 0  # a zero row: scale 1, every product 0
    x[1, :, 5] *= 40  # an outlier channel, which the smoothing takes into the weight
    factor = smoothing(linear.weight.detach(), x.reshape(-1, 1030).abs().amax(0))
    layer = Int8Linear.from_linear(linear, factor)
    y = layer(x)
    assert y.shape == (2, 9, 301)
    assert torch.equal(y[0, 3], torch.zeros(301))
    torch.testing.assert_close(y.double(), _definition(x, linear.weight.detach(), None, factor), atol=1e-5, rtol=1e-5)


def test_two_threads_split_a_large_layer_as_one_does(two_threads):
    torch.manual_seed(2)
    layer = Int8Linear.from_linear(torch.nn.Linear(512, 1000))
    x = torch.randn(37, 512)
    together = layer(x)
    torch.set_num_threads(1)
    assert torch.equal(layer(x), together)


def test_int8_stays_close_to_fp32_and_the_outlier_shows_why_smoothing():
    """The quantization error is small against the output's size; an outlier channel makes it large without
    the smoothing (every other channel of the row loses its resolution) and small again with it."""
    torch.manual_seed(3)
    linear = torch.nn.Linear(768, 256)
    x = torch.randn(64, 768)
    exact = linear(x).detach()
    plain = Int8Linear.from_linear(linear)
    assert ((plain(x) - exact).norm() / exact.norm()).item() < 0.02
    x[:, 10] *= 100
    exact = linear(x).detach()
    error_plain = ((plain(x) - exact).norm() / exact.norm()).item()
    smoothed = Int8Linear.from_linear(linear, smoothing(linear.weight.detach(), x.abs().amax(0)))
    error_smoothed = ((smoothed(x) - exact).norm() / exact.norm()).item()
    assert error_smoothed < error_plain / 2


def test_packing_puts_four_inputs_of_each_output_together():
    weight_q = torch.arange(20 * 6, dtype=torch.int32).reshape(20, 6).remainder(127).to(torch.int8)
    packed = pack(weight_q)
    assert packed.numel() == 32 * 8  # 20 outputs -> 32, 6 inputs -> 8
    blocks = packed.reshape(2, 2, 16, 4)  # [output block][input group][output][input]
    assert torch.equal(blocks[0, 1, 3, :2], weight_q[3, 4:6])
    assert torch.equal(blocks[1, 0, 3], weight_q[19, 0:4])
    assert torch.equal(blocks[0, 1, 3, 2:], torch.zeros(2, dtype=torch.int8))  # padded inputs are 0
    assert torch.equal(blocks[1, 0, 4], torch.zeros(4, dtype=torch.int8))  # padded outputs are 0


def test_weights_use_the_symmetric_range():
    weight = torch.tensor([[1.0, -2.0, 0.5], [0.0, 0.0, 0.0]])
    weight_q, scale = quantize_weight(weight)
    assert weight_q.tolist()[0] == [64, -127, 32]  # 1 / (2 / 127) = 63.5 rounds to even
    assert weight_q.abs().max() <= 127 and torch.all(scale > 0)


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)
