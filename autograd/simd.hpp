#pragma once
// xsimd, for every file that uses it directly or through xtensor. Included through here so
// that GCC 12's false positive about it is silenced in one place: its AVX-512 intrinsics
// (_mm512_srai_epi32, _mm512_extractf64x4_pd, ...) start from a deliberately undefined
// register, which GCC 12 reports as "'__Y' is used uninitialized" wherever xsimd's exp, log,
// pow or hadd are inlined (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <xsimd/xsimd.hpp>
#pragma GCC diagnostic pop
