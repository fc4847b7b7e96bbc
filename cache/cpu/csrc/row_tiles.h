// y = x W^T for several rows x at once (one per stream of a batched decode step), on an AVX2 CPU, in fp32.
//
// With eight rows a product does 16 flops per weight float it reads: no longer a pure stream of the weight.
// Tiles of 3 weight rows x 4 input rows keep 12 sums in registers (3 weight vectors and one input vector beside
// them: all 16 AVX registers), so each weight load serves 4 rows and each input load 3 weight rows. Measured on
// the README's CPU, eight rows (GFLOPS; the weight read, GB/s): the tiles alone, weights in cache, 96 on one
// core (its FMA peak: 117); streaming the weights, 29 (4 GB/s); with the next block of weight rows prefetched
// into L2 while this one is multiplied, 86 (21 GB/s), against 48 for the one-row kernel's blocks of 4 weight
// rows by 2 input rows. Prefetching into L1 instead gave 40. The input dimension goes in chunks of
// kChunkFloats, so that 8 input rows' chunks and a weight block's stay in L1 for every tile of input rows.
//
// Every output is exactly what the one-row kernel (`dot_four`) computes for that row alone: one FMA chain per
// 8 lanes over the input dimension in order, from zero (partial sums parked in memory between chunks keep
// every bit), then the same pairwise sum of the 8 lanes.

#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstdint>

namespace edge_kernels {

constexpr int kTileWeights = 3;  // weight rows per tile
constexpr int kTileInputs = 4;   // input rows per tile
constexpr int64_t kChunkFloats = 512;
constexpr int64_t kMaxTiledRows = 64;  // the partial sums of this many input rows fit multiply_block's buffer

// The four sums of the lanes of a0..a3, each as dot_four sums its lanes (hadd pairs, then the two halves).
inline __m128 lane_sums_four(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 sums = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(sums), _mm256_extractf128_ps(sums, 1));
}

// sums[i][j] (8 lanes each, parked in memory) += W rows i x input rows j over floats [begin, end) of the input
// dimension; `prefetch`: the same floats of the next block's weight rows (or null).
template <int W, int X>
inline void multiply_tile(const float* weight, const float* x, int64_t in, int64_t begin, int64_t end,
                          float* sums, const float* prefetch) {
  __m256 acc[W][X];
  for (int i = 0; i < W; ++i)
    for (int j = 0; j < X; ++j) acc[i][j] = _mm256_loadu_ps(sums + (i * X + j) * 8);
  for (int64_t d = begin; d < end; d += 8) {
    if (prefetch != nullptr && (d & 15) == 0) {  // one 64-byte line of each next weight row every 16 floats
      for (int i = 0; i < W; ++i) _mm_prefetch(reinterpret_cast<const char*>(prefetch + i * in + d), _MM_HINT_T1);
    }
    __m256 w[W];
    for (int i = 0; i < W; ++i) w[i] = _mm256_loadu_ps(weight + i * in + d);
    for (int j = 0; j < X; ++j) {
      const __m256 v = _mm256_loadu_ps(x + j * in + d);
      for (int i = 0; i < W; ++i) acc[i][j] = _mm256_fmadd_ps(v, w[i], acc[i][j]);
    }
  }
  for (int i = 0; i < W; ++i)
    for (int j = 0; j < X; ++j) _mm256_storeu_ps(sums + (i * X + j) * 8, acc[i][j]);
}

// Tile W x X for the X input rows starting at x (shapes known at compile time: the sums stay in registers).
template <int W>
inline void multiply_tile_of(int x_rows, const float* weight, const float* x, int64_t in, int64_t begin,
                             int64_t end, float* sums, const float* prefetch) {
  switch (x_rows) {
    case 1: multiply_tile<W, 1>(weight, x, in, begin, end, sums, prefetch); break;
    case 2: multiply_tile<W, 2>(weight, x, in, begin, end, sums, prefetch); break;
    case 3: multiply_tile<W, 3>(weight, x, in, begin, end, sums, prefetch); break;
    default: multiply_tile<W, 4>(weight, x, in, begin, end, sums, prefetch); break;
  }
}

// y[r, o] for weight rows [first, first + count) (count <= kTileWeights) and every input row r < rows
// (rows <= kMaxTiledRows); in a multiple of 8. `next`: the weight rows after these, prefetched meanwhile (or null).
inline void multiply_block(const float* weight, int64_t first, int count, const float* x, int64_t rows,
                           int64_t in, float* y, int64_t out_features, const float* next) {
  // per tile of input rows, its count x X partial sums of 8 lanes
  alignas(32) float all_sums[kMaxTiledRows / kTileInputs * kTileWeights * kTileInputs * 8];
  const int64_t tiles = (rows + kTileInputs - 1) / kTileInputs;
  std::fill(all_sums, all_sums + tiles * kTileWeights * kTileInputs * 8, 0.0f);
  const float* w = weight + first * in;
  for (int64_t begin = 0; begin < in; begin += kChunkFloats) {
    const int64_t end = std::min(in, begin + kChunkFloats);
    for (int64_t t = 0; t < tiles; ++t) {
      const int x_rows = static_cast<int>(std::min<int64_t>(kTileInputs, rows - t * kTileInputs));
      const float* xt = x + t * kTileInputs * in;
      float* tile_sums = all_sums + t * kTileWeights * kTileInputs * 8;
      const float* prefetch = t == 0 ? next : nullptr;
      switch (count) {
        case 1: multiply_tile_of<1>(x_rows, w, xt, in, begin, end, tile_sums, prefetch); break;
        case 2: multiply_tile_of<2>(x_rows, w, xt, in, begin, end, tile_sums, prefetch); break;
        default: multiply_tile_of<3>(x_rows, w, xt, in, begin, end, tile_sums, prefetch); break;
      }
    }
  }
  for (int64_t t = 0; t < tiles; ++t) {
    const int x_rows = static_cast<int>(std::min<int64_t>(kTileInputs, rows - t * kTileInputs));
    const float* tile_sums = all_sums + t * kTileWeights * kTileInputs * 8;
    const int outputs = count * x_rows;
    for (int k = 0; k < outputs; k += 4) {  // four outputs' lanes summed at a time (missing ones: zeros)
      __m256 a[4];
      for (int u = 0; u < 4; ++u) a[u] = k + u < outputs ? _mm256_loadu_ps(tile_sums + (k + u) * 8) : _mm256_setzero_ps();
      float four[4];
      _mm_storeu_ps(four, lane_sums_four(a[0], a[1], a[2], a[3]));
      for (int u = 0; u < 4 && k + u < outputs; ++u) {
        const int i = (k + u) / x_rows, j = (k + u) % x_rows;
        y[(t * kTileInputs + j) * out_features + first + i] = four[u];
      }
    }
  }
}

}  // namespace edge_kernels
