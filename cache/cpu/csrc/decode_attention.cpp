// Attention of one new token over a span of cached keys and values, on an AVX2 CPU, in fp32.
//
// A decode step's attention is a memory-bound read of every cached key and value. On the AMD CPU of the
// README, MKL's small matrix products (3 query rows against 2K keys of 64 floats) read at about 8 GB/s,
// half of what a plain sum reads, and SDPA is no faster. Here each key and value row is read once for all
// the query heads that share it (grouped-query attention), with explicit AVX2 dot products and weighted
// sums, four rows a quarter of the span apart at a time: four memory streams at once read faster than one.
// Built by cache/cpu_kernels.py with -mavx2 -mfma, only where torch reports AVX2.

#include <ATen/Parallel.h>
#include <ATen/ATen.h>

#include <algorithm>
#include <vector>

#include "simd.h"

using edge_kernels::add_scaled;
using edge_kernels::dot;
using edge_kernels::dot_four;
using edge_kernels::kLanes;
using edge_kernels::kSliceBytes;

// Registers of 8 floats per query row that weighted_sum keeps its sums in: at most 12 of the 16 AVX
// registers hold sums (the rest: a weight and the row's slice).
constexpr int slice_registers(int64_t group) { return group <= 3 ? 4 : (group <= 6 ? 2 : 1); }

// out[g] = sum_i p[g, i] v_{visible[i]} for a group of G query rows, [G, D] (out zeroed). The G x C sums stay
// in registers, so D is done in slices of C * 8 floats, each a pass over the rows (two passes of 128 bytes a
// row for the reference model's 64-float heads).
template <int G>
void weighted_sum(const float* values, int64_t stride, const int64_t* visible, int64_t count, const float* p,
                  float* out, int64_t dim) {
  constexpr int C = slice_registers(G);
  for (int64_t start = 0; start < dim; start += C * kLanes) {
    __m256 sums[G][C];
    for (int g = 0; g < G; ++g)
      for (int c = 0; c < C; ++c) sums[g][c] = _mm256_setzero_ps();
    const auto add_row = [&](int64_t row) {
      const float* slice = values + visible[row] * stride + start;
      for (int g = 0; g < G; ++g) {
        const __m256 w = _mm256_set1_ps(p[g * count + row]);
        for (int c = 0; c < C; ++c) sums[g][c] = _mm256_fmadd_ps(w, _mm256_loadu_ps(slice + c * kLanes), sums[g][c]);
      }
    };
    const int64_t quarter = count / 4;  // four rows a quarter of the span apart at a time: four memory streams
    for (int64_t i = 0; i < quarter; ++i) {
      for (int r = 0; r < 4; ++r) add_row(i + r * quarter);
    }
    for (int64_t row = 4 * quarter; row < count; ++row) add_row(row);
    for (int g = 0; g < G; ++g)
      for (int c = 0; c < C; ++c) _mm256_storeu_ps(out + g * dim + start + c * kLanes, sums[g][c]);
  }
}

// weighted_sum for the group sizes of common models (2-8 query heads per KV head); false: not handled here.
bool weighted_sum_in_registers(int64_t group, const float* values, int64_t stride, const int64_t* visible,
                               int64_t count, const float* p, float* out, int64_t dim) {
  if (dim % (slice_registers(group) * kLanes) != 0) return false;
  switch (group) {
    case 1: weighted_sum<1>(values, stride, visible, count, p, out, dim); return true;
    case 2: weighted_sum<2>(values, stride, visible, count, p, out, dim); return true;
    case 3: weighted_sum<3>(values, stride, visible, count, p, out, dim); return true;
    case 4: weighted_sum<4>(values, stride, visible, count, p, out, dim); return true;
    case 5: weighted_sum<5>(values, stride, visible, count, p, out, dim); return true;
    case 6: weighted_sum<6>(values, stride, visible, count, p, out, dim); return true;
    case 7: weighted_sum<7>(values, stride, visible, count, p, out, dim); return true;
    case 8: weighted_sum<8>(values, stride, visible, count, p, out, dim); return true;
    default: return false;
  }
}

// query [B, H_q, 1, D]; key, value [B, H_kv, N, D] (rows contiguous, any token/head/batch strides);
// attended: none (every key), [N] bool (true = attend) shared by the whole batch, or [B, N] bool, one mask per
// batch row (several streams decoded together, each with its own length). Returns [B, 1, H_q, D].
// Query head h reads KV head h / (H_q / H_kv), as transformers' repeat_kv does. Every row's result is the one it
// gets alone (batch 1, its own mask), bit for bit: its scores are laid out and normalized as they are then.
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
  // per batch row: its visible tokens, how many, and where its [H_q, count] scores start
  std::vector<const int64_t*> shown_of(batch);
  std::vector<int64_t> count_of(batch), scores_at(batch + 1, 0);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t m = per_row ? b : 0;
    shown_of[b] = visible.data() + first[m];
    count_of[b] = first[m + 1] - first[m];
    scores_at[b + 1] = scores_at[b] + q_heads * count_of[b];
  }

  const float* qp = q.data_ptr<float>();
  const float* kp = key.data_ptr<float>();
  const float* vp = value.data_ptr<float>();
  const float scale = static_cast<float>(scaling);

  // scores[b, h_q, i] = scale * q . k_{visible[i]}: each key row read once for its whole group of query heads
  auto scores = at::empty({scores_at[batch]}, query.options());
  auto probs = at::empty({scores_at[batch]}, query.options());
  // threads share the KV heads in slices of at least kSliceBytes of keys (or values) each
  const int64_t mean_count = std::max<int64_t>(1, scores_at[batch] / (batch * q_heads));
  const int64_t grain = std::max<int64_t>(1, kSliceBytes / (mean_count * dim * static_cast<int64_t>(sizeof(float))));
  float* sp = scores.data_ptr<float>();
  at::parallel_for(0, batch * kv_heads, grain, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / kv_heads, h = bh % kv_heads;
      const int64_t count = count_of[b];
      const int64_t* shown = shown_of[b];
      const float* keys = kp + b * key.stride(0) + h * key.stride(1);
      const float* rows = qp + (b * q_heads + h * group) * dim;  // the group's query rows, [G, D]
      float* s = sp + scores_at[b] + h * group * count;
      // four key rows a quarter of the span apart at a time (four memory streams), each read once for the group
      const int64_t quarter = dim % kLanes == 0 ? count / 4 : 0;
      for (int64_t i = 0; i < quarter; ++i) {
        const float* k0 = keys + shown[i] * key.stride(2);
        const float* k1 = keys + shown[i + quarter] * key.stride(2);
        const float* k2 = keys + shown[i + 2 * quarter] * key.stride(2);
        const float* k3 = keys + shown[i + 3 * quarter] * key.stride(2);
        for (int64_t g = 0; g < group; ++g) {
          float four[4];
          _mm_storeu_ps(four, _mm_mul_ps(dot_four(rows + g * dim, k0, k1, k2, k3, dim), _mm_set1_ps(scale)));
          for (int r = 0; r < 4; ++r) s[g * count + i + r * quarter] = four[r];
        }
      }
      for (int64_t i = 4 * quarter; i < count; ++i) {
        const float* k_row = keys + shown[i] * key.stride(2);
        for (int64_t g = 0; g < group; ++g) s[g * count + i] = scale * dot(rows + g * dim, k_row, dim);
      }
      // ATen's vectorized softmax of the group's score rows while they are in cache (each row normalized on its
      // own, as in a softmax over all rows at once), without a second parallel region to wait for
      const int64_t offset = scores_at[b] + h * group * count;
      auto row_probs = probs.narrow(0, offset, group * count).view({group, count});
      at::softmax_out(row_probs, scores.narrow(0, offset, group * count).view({group, count}), -1);
    }
  });

  // out[b, 0, h_q] = sum_i p[b, h_q, i] v_{visible[i]}: each value row read once for its whole group
  auto out = at::zeros({batch, 1, q_heads, dim}, query.options());
  float* op = out.data_ptr<float>();
  at::parallel_for(0, batch * kv_heads, grain, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / kv_heads, h = bh % kv_heads;
      const int64_t count = count_of[b];
      const int64_t* shown = shown_of[b];
      const float* values = vp + b * value.stride(0) + h * value.stride(1);
      const float* p = probs.data_ptr<float>() + scores_at[b] + h * group * count;
      float* acc = op + (b * q_heads + h * group) * dim;  // the group's output rows, [G, D]
      if (!weighted_sum_in_registers(group, values, value.stride(2), shown, count, p, acc, dim)) {
        for (int64_t i = 0; i < count; ++i) {
          const float* v_row = values + shown[i] * value.stride(2);
          for (int64_t g = 0; g < group; ++g) add_scaled(acc + g * dim, v_row, p[g * count + i], dim);
        }
      }
    }
  });
  return out;
}
