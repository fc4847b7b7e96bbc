// y = x W^T + b with int8 weights (one scale per output channel) and each row of x quantized to int8 with a scale
// per 64 inputs (per token and group), on an AVX2 CPU. cache/cpu/int8_linear.py packs the weight and says why.
//
// AVX2 has one int8 product: vpmaddubsw, unsigned 8-bit x signed 8-bit, pairs summed into saturating int16.
// Signed x signed goes through it exactly as |x| x (w with x's sign) (vpsignb): |x| <= 127 and |w| <= 127 keep a
// pair's sum within int16. vpmaddwd by ones then sums the pairs into int32. On the README's AMD CPU this runs at
// about 94 G multiply-adds a second per core against 49 for fp32 FMAs (and 31-38 for MKL's fp32 products).
//
// The packed weight: out_features padded to 16, in_features to 64, laid out as [out/16][in/4][16 outputs][4
// inputs], so that one 32-byte load holds 4 inputs of 8 outputs, the order vpmaddubsw + vpmaddwd sum them in.
// A block of 16 outputs (16 x in bytes: 24 KiB for in = 1536) stays in the L1/L2 cache while every row passes.
// The int32 sums of a group of 64 inputs are exact; each group's sum is scaled (its row's group scale) and
// added in fp32.

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace {

constexpr int64_t kBlockOutputs = 16;
constexpr int64_t kGroup = 64;  // inputs per activation scale
// 3 rows x 2 vectors of 8 outputs: 6 int32 accumulators (with 4 rows the compiler spilled some to the stack)
constexpr int kRowsAtOnce = 3;
constexpr int64_t kTileBytes = int64_t{192} << 10;  // int8 inputs of a tile of rows: within a core's 512 KiB L2

// One row -> int8 (round half to even, as torch.round), its magnitudes, and a scale per group of 64 inputs:
// max |x| / 127 over the group (1 for a group of zeros). The padding past `in` is zeros.
void quantize_row(const float* x, int64_t in, int64_t padded, int8_t* q, uint8_t* magnitudes, float* scales) {
  for (int64_t start = 0; start < padded; start += kGroup) {
    const int64_t stop = std::min(start + kGroup, in);
    float peak = 0.f;
    for (int64_t k = start; k < stop; ++k) peak = std::max(peak, std::fabs(x[k]));
    const float scale = peak > 0.f ? peak / 127.f : 1.f;
    const float inverse = 1.f / scale;
    for (int64_t k = start; k < stop; ++k) {
      const float v = std::nearbyint(x[k] * inverse);
      q[k] = static_cast<int8_t>(std::min(127.f, std::max(-127.f, v)));
    }
    for (int64_t k = std::max(start, stop); k < start + kGroup; ++k) q[k] = 0;
    scales[start / kGroup] = scale;
  }
  for (int64_t k = 0; k < padded; ++k) magnitudes[k] = static_cast<uint8_t>(q[k] < 0 ? -q[k] : q[k]);
}

// rows R of q (int8, `padded` apart; group scales `groups` apart) x one block of 16 packed outputs -> fp32 sums
// [R][16]: each group's exact int32 sum times its scale, added in group order.
template <int R>
inline void multiply_block(const int8_t* q, const uint8_t* magnitudes_of_q, const float* scales, int64_t padded,
                           const int8_t* panel, float* sums) {
  const __m256i ones = _mm256_set1_epi16(1);
  const int64_t groups = padded / kGroup;
  // the fp32 totals live in `sums` (L1), not in registers: the int32 accumulators, 2 weight vectors, a row's 2
  // broadcasts and the ones need the 16 AVX registers (totals in registers made the compiler spill accumulators)
  for (int i = 0; i < R * kBlockOutputs; ++i) sums[i] = 0.f;
  for (int64_t g = 0; g < groups; ++g) {
    __m256i acc[R][2];
    for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    for (int64_t k = g * kGroup; k < (g + 1) * kGroup; k += 4) {
      const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + k * kBlockOutputs));
      const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(panel + k * kBlockOutputs + 32));
      for (int r = 0; r < R; ++r) {
        int32_t four, four_magnitudes;
        std::memcpy(&four, q + r * padded + k, 4);
        std::memcpy(&four_magnitudes, magnitudes_of_q + r * padded + k, 4);
        const __m256i signs = _mm256_set1_epi32(four);
        const __m256i magnitudes = _mm256_set1_epi32(four_magnitudes);
        acc[r][0] = _mm256_add_epi32(
            acc[r][0], _mm256_madd_epi16(_mm256_maddubs_epi16(magnitudes, _mm256_sign_epi8(w0, signs)), ones));
        acc[r][1] = _mm256_add_epi32(
            acc[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(magnitudes, _mm256_sign_epi8(w1, signs)), ones));
      }
    }
    for (int r = 0; r < R; ++r) {
      const __m256 scale = _mm256_set1_ps(scales[r * groups + g]);
      for (int half = 0; half < 2; ++half) {
        float* total = sums + r * kBlockOutputs + half * 8;
        _mm256_storeu_ps(total, _mm256_add_ps(_mm256_loadu_ps(total),
                                              _mm256_mul_ps(_mm256_cvtepi32_ps(acc[r][half]), scale)));
      }
    }
  }
}

void multiply_rows(int rows, const int8_t* q, const uint8_t* magnitudes, const float* scales, int64_t padded,
                   const int8_t* panel, float* sums) {
  static_assert(kRowsAtOnce == 3, "multiply_rows takes 1 to kRowsAtOnce rows");
  switch (rows) {
    case 3: multiply_block<3>(q, magnitudes, scales, padded, panel, sums); break;
    case 2: multiply_block<2>(q, magnitudes, scales, padded, panel, sums); break;
    default: multiply_block<1>(q, magnitudes, scales, padded, panel, sums); break;
  }
}

}  // namespace

// x [..., in] fp32; packed int8 (see above) for `out_features` outputs; weight_scale [out] fp32; bias [out] or
// none.
at::Tensor int8_linear(const at::Tensor& x, const at::Tensor& packed, const at::Tensor& weight_scale,
                       const c10::optional<at::Tensor>& bias, int64_t out_features) {
  TORCH_CHECK(x.device().is_cpu() && x.scalar_type() == at::kFloat, "int8_linear: fp32 CPU input expected");
  TORCH_CHECK(packed.scalar_type() == at::kChar && packed.is_contiguous() && packed.dim() == 1,
              "int8_linear: a packed int8 weight expected");
  const int64_t in = x.size(-1);
  const int64_t padded = (in + kGroup - 1) / kGroup * kGroup;
  const int64_t groups = padded / kGroup;
  const int64_t blocks = (out_features + kBlockOutputs - 1) / kBlockOutputs;
  TORCH_CHECK(packed.numel() == blocks * kBlockOutputs * padded, "int8_linear: packed weight of another shape");
  TORCH_CHECK(weight_scale.scalar_type() == at::kFloat && weight_scale.is_contiguous() &&
                  weight_scale.numel() == out_features,
              "int8_linear: one fp32 weight scale per output expected");
  const bool has_bias = bias.has_value() && bias->defined();
  TORCH_CHECK(!has_bias || (bias->scalar_type() == at::kFloat && bias->is_contiguous() && bias->numel() == out_features),
              "int8_linear: one fp32 bias per output expected");
  const auto xs = x.contiguous();
  const int64_t rows = in > 0 ? xs.numel() / in : 0;
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = out_features;
  auto y = at::empty(shape, x.options());
  if (rows == 0) return y;

  std::vector<int8_t> q(rows * padded);
  std::vector<uint8_t> magnitudes(rows * padded);  // |q|: vpmaddubsw's unsigned operand
  std::vector<float> scales(rows * groups);
  const float* xp = xs.data_ptr<float>();
  at::parallel_for(0, rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(in, 1)), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      quantize_row(xp + r * in, in, padded, q.data() + r * padded, magnitudes.data() + r * padded,
                   scales.data() + r * groups);
  });

  const int8_t* wp = packed.data_ptr<int8_t>();
  const float* ws = weight_scale.data_ptr<float>();
  const float* bp = has_bias ? bias->data_ptr<float>() : nullptr;
  float* yp = y.data_ptr<float>();
  // Threads split the output blocks. Rows go in tiles whose int8 inputs (at most kTileBytes) stay in a core's L2
  // cache while the thread's blocks pass: without tiles, every block read all rows again from L3 (1.2x instead of
  // 1.6x over fp32 for 1,024 rows of the vision tower's 1280-wide layers).
  const int64_t tile_rows = std::max<int64_t>(kRowsAtOnce, kTileBytes / padded / kRowsAtOnce * kRowsAtOnce);
  at::parallel_for(0, blocks, 1, [&](int64_t begin, int64_t end) {
    float sums[kRowsAtOnce * kBlockOutputs];
    for (int64_t tile = 0; tile < rows; tile += tile_rows) {
      const int64_t tile_end = std::min(rows, tile + tile_rows);
      for (int64_t block = begin; block < end; ++block) {
        const int8_t* panel = wp + block * kBlockOutputs * padded;
        const int64_t first = block * kBlockOutputs;
        const int64_t count = std::min<int64_t>(kBlockOutputs, out_features - first);
        for (int64_t r = tile; r < tile_end; r += kRowsAtOnce) {
          const int n = static_cast<int>(std::min<int64_t>(kRowsAtOnce, tile_end - r));
          multiply_rows(n, q.data() + r * padded, magnitudes.data() + r * padded, scales.data() + r * groups, padded,
                        panel, sums);
          for (int i = 0; i < n; ++i) {
            float* out = yp + (r + i) * out_features + first;
            for (int64_t o = 0; o < count; ++o) {
              const float value = sums[i * kBlockOutputs + o] * ws[first + o];
              out[o] = bp ? value + bp[first + o] : value;
            }
          }
        }
      }
    }
  });
  return y;
}
