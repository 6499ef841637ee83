#include "ops/kernels/isa/gemm_bf16_avx512.hpp"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>

#include "ops/kernels/isa/bf16_pairs.hpp"

namespace tapegrad::kernels::avx512_bf16 {

using namespace bf16_pairs;

// 16 pairs at a time (bf16_pairs::row_pairs); the last few through a masked store.
TAPEGRAD_BF16_PAIRS_TARGET std::size_t pack_row_pairs(const float* row, std::size_t K,
                                                      std::uint32_t* out) {
  const std::size_t pairs = (K + 1) / 2;
  for (std::size_t p = 0; p < pairs; p += 16)
    _mm512_mask_storeu_epi32(out + p, first(pairs - p), row_pairs(row + 2 * p, K - 2 * p));
  return pairs;
}

TAPEGRAD_BF16_PAIRS_TARGET void pack_column_pairs(const float* even, const float* odd,
                                                  std::uint32_t* out) {
  _mm512_storeu_si512(out, column_pairs(even, odd, 16));
}

// 8 rows x 32 columns in 16 registers; per pair two loads of B and 8 broadcasts of A feed
// 16 VDPBF16PS.
__attribute__((target("avx512f,avx512bf16"))) void tile(const std::uint32_t* a,
                                                         std::size_t pairs,
                                                         const std::uint32_t* b0,
                                                         const std::uint32_t* b1,
                                                         float* tile) {
  __m512 acc[kTileRows][2];
  for (auto& row : acc) row[0] = row[1] = _mm512_setzero_ps();
  for (std::size_t p = 0; p < pairs; ++p) {
    const __m512bh x0 = (__m512bh)_mm512_loadu_si512(b0 + p * kPanel);
    const __m512bh x1 = (__m512bh)_mm512_loadu_si512(b1 + p * kPanel);
    for (std::size_t r = 0; r < kTileRows; ++r) {
      const __m512bh w = (__m512bh)_mm512_set1_epi32(int(a[r * pairs + p]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], w, x0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], w, x1);
    }
  }
  for (std::size_t r = 0; r < kTileRows; ++r) {
    _mm512_storeu_ps(tile + r * 2 * kPanel, acc[r][0]);
    _mm512_storeu_ps(tile + r * 2 * kPanel + kPanel, acc[r][1]);
  }
}

TAPEGRAD_BF16_PAIRS_TARGET void gemv_pairs(bool trans_b, std::size_t N, std::size_t K,
                                           const std::uint32_t* x_pairs, const float* B,
                                           std::size_t ldb, float* y) {
  constexpr std::size_t kWays = 4;
  if (!trans_b) {
    for (std::size_t n0 = 0; n0 < N; n0 += 16 * kWays) {
      __m512 sum[kWays] = {};
      for (std::size_t k = 0; k < K; k += 2) {
        const __m512bh xk = (__m512bh)_mm512_set1_epi32(int(x_pairs[k / 2]));
        const float* even = B + k * ldb + n0;
        const float* odd = k + 1 < K ? even + ldb : nullptr;
        for (std::size_t j = 0; j < kWays; ++j) {
          const std::size_t at = 16 * j;
          const __m512i b = column_pairs(even + at, odd ? odd + at : nullptr, left(N, n0 + at));
          sum[j] = _mm512_dpbf16_ps(sum[j], xk, (__m512bh)b);
        }
      }
      for (std::size_t j = 0; j < kWays; ++j)
        _mm512_mask_storeu_ps(y + n0 + 16 * j, first(left(N, n0 + 16 * j)), sum[j]);
    }
    return;
  }
  for (std::size_t n0 = 0; n0 < N; n0 += kWays) {
    const std::size_t rows = std::min(kWays, N - n0);
    __m512 sum[kWays] = {};
    for (std::size_t k = 0; k < K; k += 32) {
      const __m512bh xk = (__m512bh)_mm512_loadu_si512(x_pairs + k / 2);
      for (std::size_t r = 0; r < rows; ++r)
        sum[r] = _mm512_dpbf16_ps(sum[r], xk, (__m512bh)row_pairs(B + (n0 + r) * ldb + k, K - k));
    }
    for (std::size_t r = 0; r < rows; ++r) y[n0 + r] = _mm512_reduce_add_ps(sum[r]);
  }
}

}  // namespace tapegrad::kernels::avx512_bf16
#endif
