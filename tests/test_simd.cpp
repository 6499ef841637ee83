// platform/simd.hpp's helpers over xsimd, at every width this machine compiles for: the
// batch width of -march (AVX-512 gives 16 float lanes) and the narrower ones below it.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>

#include "platform/simd.hpp"

namespace {

// Lane w of haddp's answer must be the sum of batch w's lanes; the lanes hold distinct
// values of every magnitude a lane could be mistaken for.
template <class T, class A>
void check_haddp() {
  using V = xsimd::batch<T, A>;
  constexpr std::size_t W = V::size;
  V rows[W];
  T want[W];
  for (std::size_t w = 0; w < W; ++w) {
    alignas(64) T lanes[W];
    want[w] = 0;
    for (std::size_t i = 0; i < W; ++i) {
      lanes[i] = T(1000 * w + i * i) + T(0.25);
      want[w] += lanes[i];
    }
    rows[w] = V::load_aligned(lanes);
  }
  alignas(64) T got[W];
  tapegrad::simd::haddp(rows).store_aligned(got);
  for (std::size_t w = 0; w < W; ++w) {
    INFO(A::name() << " lanes " << W << ", batch " << w);
    CHECK(got[w] == want[w]);  // small integers and quarters: exact in any order of adds
  }
}

template <class T>
void check_haddp_every_width() {
  check_haddp<T, xsimd::default_arch>();
#if XSIMD_WITH_AVX
  check_haddp<T, xsimd::avx>();
#endif
#if XSIMD_WITH_SSE2
  check_haddp<T, xsimd::sse2>();
#endif
}

}  // namespace

TEST_CASE("simd: haddp gives each batch's lane sum at every width (xsimd 8.1's 16-lane float one does not)", "[simd]") {
  check_haddp_every_width<float>();
  check_haddp_every_width<double>();
}
