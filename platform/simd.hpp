#pragma once
// xsimd, for every file that uses it directly or through xtensor: the engine (autograd/,
// through xtensor), the kernels and the optimisers. It sits in platform/, below all of
// them, so that neither autograd/ nor ops/kernels/ reaches into the other for it.

// <xsimd/xsimd.hpp> resolves to platform/xsimd_shim/xsimd/xsimd.hpp first, which pins
// xtensor's storage alignment and carries the compiler workarounds, then includes xsimd.
#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <cstddef>
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

// The first n (< the batch's size) numbers at p as a batch whose other lanes are 0, and the
// first n lanes of x stored at p, touching no memory past p + n. AVX-512's masked loads and
// stores where the build has them: a short row's tail through a buffer was two library
// copies per row, a fifth of a soft-capped attention at T = 16.
template <class T, class A = xsimd::default_arch>
xsimd::batch<T, A> load_first(const T* p, std::size_t n) {
#if XSIMD_WITH_AVX512F
  if constexpr (std::is_base_of_v<xsimd::avx512f, A>) {
    if constexpr (std::is_same_v<T, float>)
      return _mm512_maskz_loadu_ps(__mmask16((1u << n) - 1), p);
    else if constexpr (std::is_same_v<T, double>)
      return _mm512_maskz_loadu_pd(__mmask8((1u << n) - 1), p);
  }
#endif
  alignas(64) T buffer[xsimd::batch<T, A>::size] = {};
  std::copy(p, p + n, buffer);
  return xsimd::batch<T, A>::load_aligned(buffer);
}

template <class T, class A>
void store_first(T* p, std::size_t n, const xsimd::batch<T, A>& x) {
#if XSIMD_WITH_AVX512F
  if constexpr (std::is_base_of_v<xsimd::avx512f, A>) {
    if constexpr (std::is_same_v<T, float>)
      return _mm512_mask_storeu_ps(p, __mmask16((1u << n) - 1), x);
    else if constexpr (std::is_same_v<T, double>)
      return _mm512_mask_storeu_pd(p, __mmask8((1u << n) - 1), x);
  }
#endif
  alignas(64) T buffer[xsimd::batch<T, A>::size];
  x.store_aligned(buffer);
  std::copy(buffer, buffer + n, p);
}

}  // namespace tapegrad::simd
