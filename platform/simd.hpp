#pragma once
// xsimd, for every file that uses it directly or through xtensor: the engine (autograd/,
// through xtensor), the kernels and the optimisers. It sits in platform/, below all of
// them, so that neither autograd/ nor ops/kernels/ reaches into the other for it. Include
// it before any xtensor or xsimd header: both fixes below must come before xsimd's code.

// GCC before 13, without optimisation (a Debug build), defines _mm512_mask_blend_epi8 and
// _epi16 as macros that cast their arguments straight to a vector type. xsimd's AVX-512BW
// select passes its batch objects, which convert to __m512i but cannot be cast like that:
// "invalid cast from type 'const xsimd::batch<int, xsimd::avx512bw>' to type '__v64qi'",
// and no Debug build compiled on an AVX-512 machine. The optimised headers declare them as
// functions; these are the same functions.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13 && !defined(__OPTIMIZE__) && \
    defined(__AVX512BW__)
#include <immintrin.h>
#undef _mm512_mask_blend_epi8
#undef _mm512_mask_blend_epi16
inline __m512i _mm512_mask_blend_epi8(__mmask64 mask, __m512i a, __m512i w) {
  return (__m512i)__builtin_ia32_blendmb_512_mask((__v64qi)a, (__v64qi)w, mask);
}
inline __m512i _mm512_mask_blend_epi16(__mmask32 mask, __m512i a, __m512i w) {
  return (__m512i)__builtin_ia32_blendmw_512_mask((__v32hi)a, (__v32hi)w, mask);
}
#endif

// GCC 12's false positive about xsimd is silenced here, in one place: its AVX-512
// intrinsics (_mm512_srai_epi32, _mm512_extractf64x4_pd, ...) start from a deliberately
// undefined register, which GCC 12 reports as "'__Y' is used uninitialized" wherever
// xsimd's exp, log, pow or hadd are inlined (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <xsimd/xsimd.hpp>
#pragma GCC diagnostic pop

#include <type_traits>

namespace tapegrad::simd {

// The horizontal sums of as many batches as a batch has lanes, as one batch: lane w holds
// the sum of v[w]'s lanes. xsimd 8.1's haddp is wrong for 16 float lanes (AVX-512: sums of
// 0..15 + 100 w came back off by up to 3200), while its 4- and 8-lane versions and every
// double width are right; there each batch's two 256-bit halves are added first and the
// 8-lane haddp gives the sums of the first and of the last eight batches.
template <class T, class A>
xsimd::batch<T, A> haddp(const xsimd::batch<T, A>* v) {
#if XSIMD_WITH_AVX512F
  if constexpr (std::is_same_v<T, float> && std::is_base_of_v<xsimd::avx512f, A>) {
    using Half = xsimd::batch<float, xsimd::avx>;
    Half halves[8];
    alignas(64) float sums[16];
    for (std::size_t part = 0; part < 2; ++part) {
      for (std::size_t w = 0; w < 8; ++w) {
        const __m512 x = v[8 * part + w];
        const __m256 high = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1));
        halves[w] = Half(_mm256_add_ps(_mm512_castps512_ps256(x), high));
      }
      xsimd::haddp(halves).store_aligned(sums + 8 * part);
    }
    return xsimd::batch<T, A>::load_aligned(sums);
  } else
#endif
  {
    return xsimd::haddp(v);
  }
}

}  // namespace tapegrad::simd
