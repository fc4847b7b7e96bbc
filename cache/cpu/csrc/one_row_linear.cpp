// y = x W^T + b for one row x (or a few: one per stream of a batched decode step), on an AVX2 CPU, in fp32.
//
// With one row, a product streams the weight from memory once. On the AMD CPU of the README, MKL streamed
// the 576-wide projections of the reference model (576 x 576, 192 x 576) at 11-13 GB/s; dot products of
// four weight rows far apart at a time (four streams) read them at 23-29 GB/s. cache/layouts.py times both
// per weight shape and keeps the faster. With several rows, each block of four weight rows is read from
// memory once and multiplied by every row while it sits in L1 (MKL read the weights at about 7 GB/s for two
// rows). Every row's result is the one it gets alone, bit for bit: the same products summed in the same order.

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <vector>

#include "row_tiles.h"
#include "simd.h"

using edge_kernels::dot;
using edge_kernels::dot_four;
using edge_kernels::dot_four_two;
using edge_kernels::kLanes;
using edge_kernels::kSliceBytes;
using edge_kernels::kTileWeights;
using edge_kernels::multiply_block;

// From this many rows on, products go in tiles (row_tiles.h); fewer rows stream the weight in 4 streams.
constexpr int64_t kTiledFromRows = 3;

// x [..., in] with one row in all, or [rows, ..., in] (x.numel() == rows * in); weight [out, in] contiguous;
// bias [out] or none. Returns [..., out].
at::Tensor one_row_linear(const at::Tensor& x, const at::Tensor& weight, const c10::optional<at::Tensor>& bias) {
  TORCH_CHECK(x.device().is_cpu() && weight.device().is_cpu(), "one_row_linear: CPU tensors expected");
  TORCH_CHECK(x.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat,
              "one_row_linear: fp32 tensors expected");
  TORCH_CHECK(weight.dim() == 2 && weight.is_contiguous(), "one_row_linear: a contiguous [out, in] weight expected");
  const int64_t out_features = weight.size(0), in_features = weight.size(1);
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == in_features && x.numel() > 0 && x.numel() % in_features == 0,
              "one_row_linear: rows of in_features expected");
  const int64_t rows = x.numel() / in_features;
  const bool has_bias = bias.has_value() && bias->defined();
  TORCH_CHECK(!has_bias || (bias->numel() == out_features && bias->scalar_type() == at::kFloat && bias->is_cpu()),
              "one_row_linear: a bias of out_features fp32 values on the CPU expected");
  const auto xs = x.contiguous();
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = out_features;
  auto y = at::empty(shape, x.options());
  const float* xp = xs.data_ptr<float>();
  const float* wp = weight.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  // threads share the weight rows in slices of at least kSliceBytes (times the rows: several rows cost compute
  // too): below that a thread's start costs more than it reads. Any split gives the same results: every output is
  // one dot_four lane, however the weight rows are grouped in fours.
  const int64_t grain =
      std::max<int64_t>(1, kSliceBytes / (rows * in_features * static_cast<int64_t>(sizeof(float))));
  if (rows >= kTiledFromRows && rows <= edge_kernels::kMaxTiledRows && in_features % kLanes == 0) {
    const int64_t blocks = (out_features + kTileWeights - 1) / kTileWeights;
    at::parallel_for(0, blocks, std::max<int64_t>(1, grain / kTileWeights), [&](int64_t begin, int64_t end) {
      for (int64_t block = begin; block < end; ++block) {
        const int64_t first = block * kTileWeights;
        const int count = static_cast<int>(std::min<int64_t>(kTileWeights, out_features - first));
        const float* next = block + 1 < end ? wp + (first + kTileWeights) * in_features : nullptr;
        multiply_block(wp, first, count, xp, rows, in_features, yp, out_features, next);
      }
    });
    if (has_bias) y.view({rows, out_features}).add_(bias->view({1, out_features}));
    return y;
  }
  at::parallel_for(0, out_features, grain, [&](int64_t begin, int64_t end) {
    // four weight rows a quarter of the range apart at a time: four memory streams at once read faster than one
    // (on the README's CPU, 23-29 GB/s against 18-20 GB/s row after row)
    const int64_t quarter = in_features % kLanes == 0 ? (end - begin) / 4 : 0;
    const int64_t step = quarter * in_features;
    for (int64_t o = begin; o < begin + quarter; ++o) {
      const float* w = wp + o * in_features;
      int64_t r = 0;
      for (; r + 2 <= rows; r += 2) {  // two rows at a time: each weight load serves both
        float four[8];
        const float* x0 = xp + r * in_features;
        dot_four_two(x0, x0 + in_features, w, w + step, w + 2 * step, w + 3 * step, in_features, four);
        for (int k = 0; k < 4; ++k) {
          yp[r * out_features + o + k * quarter] = four[k];
          yp[(r + 1) * out_features + o + k * quarter] = four[4 + k];
        }
      }
      for (; r < rows; ++r) {
        float four[4];
        _mm_storeu_ps(four, dot_four(xp + r * in_features, w, w + step, w + 2 * step, w + 3 * step, in_features));
        for (int k = 0; k < 4; ++k) yp[r * out_features + o + k * quarter] = four[k];
      }
    }
    for (int64_t o = begin + 4 * quarter; o < end; ++o) {  // the last rows of a slice, one at a time
      const float* w = wp + o * in_features;
      for (int64_t r = 0; r < rows; ++r) {
        const float* xr = xp + r * in_features;
        yp[r * out_features + o] = in_features % kLanes == 0
                                       ? _mm_cvtss_f32(dot_four(xr, w, w, w, w, in_features))  // as in a block of four
                                       : dot(w, xr, in_features);
      }
    }
  });
  if (has_bias) y.view({rows, out_features}).add_(bias->view({1, out_features}));
  return y;
}
