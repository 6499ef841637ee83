#pragma once
// Float32 numbers rounded to bf16 pairs in AVX-512 registers: the layout VDPBF16PS and AMX's
// TDPBF16PS read (a 32-bit word holds k = 2p in its low half, 2p + 1 in its high half).
// Rounded by VCVTNE2PS2BF16 (to nearest even; subnormal inputs become zero). For files that
// include <immintrin.h> and call these only where the CPU has AVX512_BF16.
#if defined(__x86_64__)
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace tapegrad::kernels::bf16_pairs {

#define TAPEGRAD_BF16_PAIRS_TARGET __attribute__((target("avx512f,avx512bw,avx512bf16")))

// Columns of B per packed panel: 16 pairs, one 512-bit register.
constexpr std::size_t kPanel = 16;

inline std::size_t round_up(std::size_t n, std::size_t m) { return (n + m - 1) / m * m; }

// How many of `have` items are left from `from` on (0 past the end): the n the loads below
// take, which clip it themselves.
inline std::size_t left(std::size_t have, std::size_t from) { return from >= have ? 0 : have - from; }

// The first n (<= 16 counts; more is all) lanes.
inline __mmask16 first(std::size_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
}

// 16 pairs from the first n floats at `row` (at most 32 are read), zeros beyond.
TAPEGRAD_BF16_PAIRS_TARGET inline __m512i row_pairs(const float* row, std::size_t n) {
  if (n == 0) return _mm512_setzero_si512();
  const __m512 lo = _mm512_maskz_loadu_ps(first(n), row);
  const __m512 hi = _mm512_maskz_loadu_ps(first(n > 16 ? n - 16 : 0), row + 16);
  return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

// 16 pairs (even[i], odd[i]) from the first n floats of two rows (at most 16 are read),
// zeros beyond; a null row (past K) reads as zeros.
TAPEGRAD_BF16_PAIRS_TARGET inline __m512i column_pairs(const float* even, const float* odd,
                                                        std::size_t n) {
  alignas(64) static const std::uint16_t interleave[32] = {
      0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
      8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  if (n == 0 || even == nullptr) return _mm512_setzero_si512();
  const __m512 e = _mm512_maskz_loadu_ps(first(n), even);
  const __m512 o = odd ? _mm512_maskz_loadu_ps(first(n), odd) : _mm512_setzero_ps();
  return _mm512_permutexvar_epi16(_mm512_load_si512(interleave),
                                  (__m512i)_mm512_cvtne2ps_pbh(o, e));
}

}  // namespace tapegrad::kernels::bf16_pairs
#endif
