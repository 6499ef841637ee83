// Every `#include <xsimd/xsimd.hpp>` in a build that uses tapegrad (tapegrad's own, xtensor's,
// a user's) opens this file first: its folder is on tapegrad's public include path, searched
// before the system's, so what it fixes holds whatever order a file includes things in.
// It then includes the real xsimd.
#ifndef TAPEGRAD_XSIMD_SHIM_HPP
#define TAPEGRAD_XSIMD_SHIM_HPP

// 1. One storage type whatever the instruction set. xtensor's default allocator aligns to
// xsimd's widest register for the target (16 bytes for SSE, 64 for AVX-512), and that
// number is part of the type: xt::xarray<bool> of a file compiled with -march=x86-64 would
// not be the xt::xarray<bool> of a library compiled with -march=native, and the two would
// not link. 64 bytes serves every instruction set (xtensor reads it before defining its own).
#ifndef XTENSOR_DEFAULT_ALLOCATOR
#define XTENSOR_DEFAULT_ALLOCATOR(T) xsimd::aligned_allocator<T, 64>
#endif
#ifndef XTENSOR_DEFAULT_ALIGNMENT
#define XTENSOR_DEFAULT_ALIGNMENT 64
#endif

// 2. GCC before 13, without optimisation (a Debug build), defines _mm512_mask_blend_epi8 and
// _epi16 as macros that cast their arguments straight to a vector type. xsimd's AVX-512BW
// select passes its batch objects, which convert to __m512i but cannot be cast like that:
// "invalid cast from type 'const xsimd::batch<int, xsimd::avx512bw>' to type '__v64qi'",
// and no Debug build compiled on an AVX-512 machine. The optimised headers declare them as
// functions; these are the same functions. They must precede xsimd's code, hence here.
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
#include_next <xsimd/xsimd.hpp>
#pragma GCC diagnostic pop

#endif  // TAPEGRAD_XSIMD_SHIM_HPP
