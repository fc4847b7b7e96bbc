// AVX2 building blocks of the CPU decode kernels: one-row dot products and scaled row sums in fp32.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace edge_kernels {

constexpr int64_t kLanes = 8;  // floats in one AVX register
// The least a thread is given to read. Built with -fopenmp, on the README's 2-core machine, the reference model's
// 1-4 MB matrices split between the two threads: one stream's eager step 34 -> 31-35 ms, eight streams' 58 -> 54-59
// ms against 4 MB (no split below 4 MB); 128 KB and 1 MB measured the same within the run-to-run noise.
constexpr int64_t kSliceBytes = int64_t{512} << 10;

inline float sum_lanes(__m256 x) {
  __m128 half = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
  half = _mm_add_ps(half, _mm_movehl_ps(half, half));
  half = _mm_add_ss(half, _mm_movehdup_ps(half));
  return _mm_cvtss_f32(half);
}

// a . b over `dim` floats: four independent FMA chains (one chain waits on the FMA latency), scalar tail.
inline float dot(const float* a, const float* b, int64_t dim) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps(), acc2 = _mm256_setzero_ps(),
         acc3 = _mm256_setzero_ps();
  int64_t d = 0;
  for (; d + 4 * kLanes <= dim; d += 4 * kLanes) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + d), _mm256_loadu_ps(b + d), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + d + kLanes), _mm256_loadu_ps(b + d + kLanes), acc1);
    acc2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + d + 2 * kLanes), _mm256_loadu_ps(b + d + 2 * kLanes), acc2);
    acc3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + d + 3 * kLanes), _mm256_loadu_ps(b + d + 3 * kLanes), acc3);
  }
  for (; d + kLanes <= dim; d += kLanes) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + d), _mm256_loadu_ps(b + d), acc0);
  }
  float total = sum_lanes(_mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
  for (; d < dim; ++d) total += a[d] * b[d];
  return total;
}

// The dot products of `q` with four rows at once, [q.r0, q.r1, q.r2, q.r3]; dim a multiple of kLanes.
// One horizontal reduction for the four (instead of one per row) keeps this loop at the memory's pace.
inline __m128 dot_four(const float* q, const float* r0, const float* r1, const float* r2, const float* r3,
                       int64_t dim) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  for (int64_t d = 0; d < dim; d += kLanes) {
    const __m256 x = _mm256_loadu_ps(q + d);
    a0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(r0 + d), a0);
    a1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(r1 + d), a1);
    a2 = _mm256_fmadd_ps(x, _mm256_loadu_ps(r2 + d), a2);
    a3 = _mm256_fmadd_ps(x, _mm256_loadu_ps(r3 + d), a3);
  }
  // hadd pairs lanes: [a0 a1 a2 a3 | a0 a1 a2 a3] partial sums, then the two halves are added
  const __m256 sums = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(sums), _mm256_extractf128_ps(sums, 1));
}

// dot_four for two query rows at once: out[0..3] = q0 . r0..r3, out[4..7] = q1 . r0..r3, each computed exactly as
// dot_four computes it (the same products in the same order), with every load of a row serving both.
inline void dot_four_two(const float* q0, const float* q1, const float* r0, const float* r1, const float* r2,
                         const float* r3, int64_t dim, float* out) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
  __m256 b0 = _mm256_setzero_ps(), b1 = _mm256_setzero_ps(), b2 = _mm256_setzero_ps(), b3 = _mm256_setzero_ps();
  for (int64_t d = 0; d < dim; d += kLanes) {
    const __m256 x = _mm256_loadu_ps(q0 + d), z = _mm256_loadu_ps(q1 + d);
    const __m256 w0 = _mm256_loadu_ps(r0 + d), w1 = _mm256_loadu_ps(r1 + d);
    const __m256 w2 = _mm256_loadu_ps(r2 + d), w3 = _mm256_loadu_ps(r3 + d);
    a0 = _mm256_fmadd_ps(x, w0, a0);
    a1 = _mm256_fmadd_ps(x, w1, a1);
    a2 = _mm256_fmadd_ps(x, w2, a2);
    a3 = _mm256_fmadd_ps(x, w3, a3);
    b0 = _mm256_fmadd_ps(z, w0, b0);
    b1 = _mm256_fmadd_ps(z, w1, b1);
    b2 = _mm256_fmadd_ps(z, w2, b2);
    b3 = _mm256_fmadd_ps(z, w3, b3);
  }
  const __m256 sa = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  const __m256 sb = _mm256_hadd_ps(_mm256_hadd_ps(b0, b1), _mm256_hadd_ps(b2, b3));
  _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(sa), _mm256_extractf128_ps(sa, 1)));
  _mm_storeu_ps(out + 4, _mm_add_ps(_mm256_castps256_ps128(sb), _mm256_extractf128_ps(sb, 1)));
}

// out += weight * row, over `dim` floats.
inline void add_scaled(float* out, const float* row, float weight, int64_t dim) {
  const __m256 w = _mm256_set1_ps(weight);
  int64_t d = 0;
  for (; d + kLanes <= dim; d += kLanes) {
    _mm256_storeu_ps(out + d, _mm256_fmadd_ps(w, _mm256_loadu_ps(row + d), _mm256_loadu_ps(out + d)));
  }
  for (; d < dim; ++d) out[d] += weight * row[d];
}

}  // namespace edge_kernels
