// Attention of one new token over a span of cached keys and values, on an AVX2 CPU, in fp32.
//
// A decode step's attention is a memory-bound read of every cached key and value. On the AMD CPU of the
// README, MKL's small matrix products (3 query rows against 2K keys of 64 floats) read at about 8 GB/s,
// half of what a plain sum reads, and SDPA is no faster. Here each key and value row is read once for all
// the query heads that share it (grouped-query attention), with explicit AVX2 dot products and weighted sums,
// and each (batch row, KV head) is one task: its scores, their softmax and its weighted sum of values, the
// probabilities staying in L1/L2 between the passes.
//
// What made it fast, measured on the README's 2-core AMD VM (8 streams, 9 query / 3 KV heads of 64 floats, a
// 2305-key span, 30 layers: 850 MB of keys and values a step, which a plain `.sum()` reads in 21-30 ms there):
// - keys: four rows a quarter of the span apart at a time (four memory streams at once read faster than one;
//   four adjacent rows, walked a register-width at a time across the four, read at 2/3 of the speed or less);
// - values: a 64-float row needs 24 accumulators for 3 query rows, more than the 16 AVX registers, so the sums
//   are done in slices of the row; the slices of a chunk of rows are summed while the chunk sits in L1 (not one
//   pass over the span per slice), and the first slice prefetches the rest of each row, so that every row is
//   requested from memory whole and in order (half rows in order, then the other halves, read 1.5x slower);
// - a hand-written softmax (max, exp, sum) instead of at::softmax_out, which cost about 7 us a call.
// Prefetching rows ahead (keys, values, or values during the softmax) was slower in every form tried.
// That step went from 62-66 ms (13 GB/s) to 38-40 ms (22 GB/s); one stream from 7.8 ms to 4.7-5.3 ms.
// Those were on one thread: at::parallel_for runs serially unless the file is compiled with -fopenmp (ATen's
// OpenMP backend is a `#pragma omp parallel` in a header), as it now is: the 8-stream attention takes 21-27 ms
// (32-40 GB/s; a torch sum of as many bytes 19-21 ms then) and one stream 3.9-4.8 ms.
// Built by cache/cpu/kernels.py with -mavx2 -mfma -fopenmp, only where torch reports AVX2.

#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "simd.h"

using edge_kernels::add_scaled;
using edge_kernels::dot;
using edge_kernels::dot_four;
using edge_kernels::kLanes;
using edge_kernels::sum_lanes;

namespace {

constexpr int kKeyStreams = 4;    // key rows a quarter of the span apart at a time
constexpr int kValueStreams = 2;  // value rows half the span apart (measured faster than four for values)
// Value rows summed slice by slice while they sit in L1 (4 KB: 16 rows of 64 floats; 8 KB was slower).
constexpr int64_t kChunkBytes = 4096;
// The least keys and values a thread is given: with OpenMP, one stream's 3 KV heads (3.5 MB) took 4.8 ms on two
// threads against 5.9 ms on one.
constexpr int64_t kThreadBytes = int64_t{1} << 20;

// e^x on 8 lanes, for x <= 0 (scores minus their max): Cephes' expf, x = n ln2 + r with |r| <= ln2 / 2 and a
// degree-5 polynomial for e^r (at most 1.2e-7 relative error over [-87, 0]). Below -88, e^x is under the
// smallest normal float: 0 here.
inline __m256 exp_lanes(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(-88.0f), x);  // NaN stays NaN (max returns its second operand)
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);  // ln2 in two parts: r exact
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^n from its exponent bits; n = -127 (x near -88) gives the bits of 0
  const __m256i two_n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(two_n));
}

// s[g * width + i] = scale * q_g . k_{shown[i]} for the group's G query rows `rows` [G, D].
void scores_of(const float* keys, int64_t stride, const int64_t* shown, int64_t count, const float* rows,
               int64_t group, int64_t dim, float scale, float* s, int64_t width) {
  const int64_t part = dim % kLanes == 0 ? count / kKeyStreams : 0;
  for (int64_t i = 0; i < part; ++i) {
    const float* k0 = keys + shown[i] * stride;
    const float* k1 = keys + shown[i + part] * stride;
    const float* k2 = keys + shown[i + 2 * part] * stride;
    const float* k3 = keys + shown[i + 3 * part] * stride;
    for (int64_t g = 0; g < group; ++g) {  // the four rows stay in L1 for the group
      float four[4];
      _mm_storeu_ps(four, _mm_mul_ps(dot_four(rows + g * dim, k0, k1, k2, k3, dim), _mm_set1_ps(scale)));
      for (int r = 0; r < kKeyStreams; ++r) s[g * width + i + r * part] = four[r];
    }
  }
  for (int64_t i = kKeyStreams * part; i < count; ++i) {
    const float* k_row = keys + shown[i] * stride;
    for (int64_t g = 0; g < group; ++g) s[g * width + i] = scale * dot(rows + g * dim, k_row, dim);
  }
}

// Softmax numerators in place: s[g, i] = e^(s[g, i] - max_i s[g, i]) for i < count (the padding up to `width`
// becomes 0); inverse[g] = 1 / sum_i s[g, i], which the weighted sums are multiplied by at the end.
void exponentiate(float* s, int64_t group, int64_t count, int64_t width, float* inverse) {
  for (int64_t g = 0; g < group; ++g) {
    float* row = s + g * width;
    std::fill(row + count, row + width, -std::numeric_limits<float>::infinity());
    __m256 most[4];  // four independent chains: one waits on max's latency
    for (int k = 0; k < 4; ++k) most[k] = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
    int64_t i = 0;
    for (; i + 4 * kLanes <= width; i += 4 * kLanes) {
      for (int k = 0; k < 4; ++k) most[k] = _mm256_max_ps(most[k], _mm256_loadu_ps(row + i + k * kLanes));
    }
    for (; i < width; i += kLanes) most[0] = _mm256_max_ps(most[0], _mm256_loadu_ps(row + i));
    float lanes[kLanes];
    _mm256_storeu_ps(lanes, _mm256_max_ps(_mm256_max_ps(most[0], most[1]), _mm256_max_ps(most[2], most[3])));
    const __m256 top = _mm256_set1_ps(*std::max_element(lanes, lanes + kLanes));
    __m256 total = _mm256_setzero_ps();
    for (i = 0; i < width; i += kLanes) {
      const __m256 e = exp_lanes(_mm256_sub_ps(_mm256_loadu_ps(row + i), top));
      _mm256_storeu_ps(row + i, e);
      total = _mm256_add_ps(total, e);
    }
    inverse[g] = 1.0f / sum_lanes(total);
  }
}

// Registers of 8 floats per query row that weighted_sum keeps its sums in: at most 12 of the 16 AVX
// registers hold sums (the rest: a weight and the row's slice).
constexpr int slice_registers(int64_t group) { return group <= 3 ? 4 : (group <= 6 ? 2 : 1); }

// out[g] = sum_i p[g * width + i] v_{shown[i]} for a group of G query rows, [G, D]. The G x C sums stay in
// registers, so D is done in slices of C * 8 floats: each chunk of rows (two streams, half the span apart)
// is summed slice after slice while it sits in L1, the sums carried over in `out`. Any chunk size gives the
// same bits: each lane adds its rows in the same order.
template <int G>
void weighted_sum(const float* values, int64_t stride, const int64_t* shown, int64_t count, const float* p,
                  int64_t width, float* out, int64_t dim) {
  constexpr int C = slice_registers(G);
  const int64_t part = count / kValueStreams;
  const int64_t row_bytes = dim * static_cast<int64_t>(sizeof(float));
  const int64_t chunk = std::max<int64_t>(1, kChunkBytes / (kValueStreams * row_bytes));
  // rows i + r * part for i in [from, to) and r < streams
  const auto add_rows = [&](int64_t from, int64_t to, int64_t streams, bool first) {
    for (int64_t start = 0; start < dim; start += C * kLanes) {
      __m256 sums[G][C];
      for (int g = 0; g < G; ++g)
        for (int c = 0; c < C; ++c)
          sums[g][c] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(out + g * dim + start + c * kLanes);
      for (int64_t i = from; i < to; ++i) {
        for (int64_t r = 0; r < streams; ++r) {
          const int64_t row = i + r * part;
          const float* slice = values + shown[row] * stride + start;
          if (start == 0) {  // the rest of the row now: each row requested whole, in order
            for (int64_t d = C * kLanes; d < dim; d += 16) {
              _mm_prefetch(reinterpret_cast<const char*>(slice + d), _MM_HINT_T0);
            }
          }
          for (int g = 0; g < G; ++g) {
            const __m256 w = _mm256_set1_ps(p[g * width + row]);
            for (int c = 0; c < C; ++c)
              sums[g][c] = _mm256_fmadd_ps(w, _mm256_loadu_ps(slice + c * kLanes), sums[g][c]);
          }
        }
      }
      for (int g = 0; g < G; ++g)
        for (int c = 0; c < C; ++c) _mm256_storeu_ps(out + g * dim + start + c * kLanes, sums[g][c]);
    }
  };
  for (int64_t from = 0; from < part; from += chunk) {
    add_rows(from, std::min(part, from + chunk), kValueStreams, from == 0);
  }
  add_rows(kValueStreams * part, count, 1, part == 0);  // the rows past the streams
}

// weighted_sum for the group sizes of common models (1-8 query heads per KV head); false: not handled here.
bool weighted_sum_in_registers(int64_t group, const float* values, int64_t stride, const int64_t* shown,
                               int64_t count, const float* p, int64_t width, float* out, int64_t dim) {
  if (dim % (slice_registers(group) * kLanes) != 0) return false;
  switch (group) {
    case 1: weighted_sum<1>(values, stride, shown, count, p, width, out, dim); return true;
    case 2: weighted_sum<2>(values, stride, shown, count, p, width, out, dim); return true;
    case 3: weighted_sum<3>(values, stride, shown, count, p, width, out, dim); return true;
    case 4: weighted_sum<4>(values, stride, shown, count, p, width, out, dim); return true;
    case 5: weighted_sum<5>(values, stride, shown, count, p, width, out, dim); return true;
    case 6: weighted_sum<6>(values, stride, shown, count, p, width, out, dim); return true;
    case 7: weighted_sum<7>(values, stride, shown, count, p, width, out, dim); return true;
    case 8: weighted_sum<8>(values, stride, shown, count, p, width, out, dim); return true;
    default: return false;
  }
}

}  // namespace

// query [B, H_q, 1, D]; key, value [B, H_kv, N, D] (rows contiguous, any token/head/batch strides);
// attended: none (every key), [N] bool (true = attend) shared by the whole batch, or [B, N] bool, one mask per
// batch row (several streams decoded together, each with its own length). Returns [B, 1, H_q, D].
// Query head h reads KV head h / (H_q / H_kv), as transformers' repeat_kv does. Every row's result is the one it
// gets alone (batch 1, its own mask), bit for bit: each (batch row, KV head) is computed by one task whose
// arithmetic depends only on that row's query, keys, values and visible tokens, whatever the batch or threads.
at::Tensor decode_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                            const c10::optional<at::Tensor>& attended, double scaling) {
  TORCH_CHECK(query.device().is_cpu() && key.device().is_cpu() && value.device().is_cpu(),
              "decode_attention: CPU tensors expected");
  TORCH_CHECK(query.scalar_type() == at::kFloat && key.scalar_type() == at::kFloat &&
                  value.scalar_type() == at::kFloat,
              "decode_attention: fp32 tensors expected");
  TORCH_CHECK(query.dim() == 4 && query.size(2) == 1 && key.dim() == 4 && value.sizes() == key.sizes(),
              "decode_attention: query [B, H_q, 1, D] and key/value [B, H_kv, N, D] expected");
  TORCH_CHECK(key.stride(3) == 1 && value.stride(3) == 1, "decode_attention: key/value rows must be contiguous");
  const int64_t batch = query.size(0), q_heads = query.size(1), dim = query.size(3);
  const int64_t kv_heads = key.size(1), tokens = key.size(2);
  TORCH_CHECK(key.size(0) == batch && key.size(3) == dim && q_heads % kv_heads == 0 && dim > 0,
              "decode_attention: unsupported head shapes");
  const bool masked = attended.has_value() && attended->defined();
  const bool per_row = masked && batch > 1 && attended->numel() == batch * tokens;
  TORCH_CHECK(!masked || ((attended->numel() == tokens || per_row) && attended->scalar_type() == at::kBool),
              "decode_attention: a bool mask over the key tokens ([N] or [B, N]) expected");
  const int64_t group = q_heads / kv_heads;

  const auto q = query.contiguous();
  // the key tokens batch row b attends to: visible[first[m] .. first[m + 1]) of mask row m = (per_row ? b : 0)
  const int64_t mask_rows = per_row ? batch : 1;
  std::vector<int64_t> visible;
  std::vector<int64_t> first(mask_rows + 1, 0);
  visible.reserve(mask_rows * tokens);
  if (masked) {
    const auto mask = attended->contiguous();
    const bool* shown = mask.data_ptr<bool>();
    for (int64_t m = 0; m < mask_rows; ++m) {
      for (int64_t t = 0; t < tokens; ++t) {
        if (shown[m * tokens + t]) visible.push_back(t);
      }
      first[m + 1] = static_cast<int64_t>(visible.size());
      TORCH_CHECK(first[m + 1] > first[m], "decode_attention: the mask hides every key");
    }
  } else {
    for (int64_t t = 0; t < tokens; ++t) visible.push_back(t);
    first[1] = tokens;
    TORCH_CHECK(tokens > 0, "decode_attention: the mask hides every key");
  }

  const float* qp = q.data_ptr<float>();
  const float* kp = key.data_ptr<float>();
  const float* vp = value.data_ptr<float>();
  const float scale = static_cast<float>(scaling);
  auto out = at::empty({batch, 1, q_heads, dim}, query.options());
  float* op = out.data_ptr<float>();
  const int64_t task_bytes = 2 * tokens * dim * static_cast<int64_t>(sizeof(float));  // a head's keys and values
  const int64_t grain = std::max<int64_t>(1, kThreadBytes / task_bytes);
  at::parallel_for(0, batch * kv_heads, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> probs;  // [G, width]: scores, then softmax numerators
    std::vector<float> inverse(group);
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / kv_heads, h = bh % kv_heads;
      const int64_t m = per_row ? b : 0;
      const int64_t* shown = visible.data() + first[m];
      const int64_t count = first[m + 1] - first[m];
      const int64_t width = (count + kLanes - 1) / kLanes * kLanes;
      probs.resize(group * width);
      const float* rows = qp + (b * q_heads + h * group) * dim;  // the group's query rows, [G, D]
      scores_of(kp + b * key.stride(0) + h * key.stride(1), key.stride(2), shown, count, rows, group, dim, scale,
                probs.data(), width);
      exponentiate(probs.data(), group, count, width, inverse.data());
      const float* values = vp + b * value.stride(0) + h * value.stride(1);
      float* acc = op + (b * q_heads + h * group) * dim;  // the group's output rows, [G, D]
      if (!weighted_sum_in_registers(group, values, value.stride(2), shown, count, probs.data(), width, acc, dim)) {
        std::fill(acc, acc + group * dim, 0.0f);
        for (int64_t i = 0; i < count; ++i) {
          const float* v_row = values + shown[i] * value.stride(2);
          for (int64_t g = 0; g < group; ++g) add_scaled(acc + g * dim, v_row, probs[g * width + i], dim);
        }
      }
      for (int64_t g = 0; g < group; ++g) {
        for (int64_t d = 0; d < dim; ++d) acc[g * dim + d] *= inverse[g];
      }
    }
  });
  return out;
}
