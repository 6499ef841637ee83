// The reference products (platform/execution.hpp's ReferenceProductsGuard): their
// numbers against a sum computed here in long double, and the property they exist for: a
// number of C is the same whatever block of C it is computed in, whatever the thread
// count, and a sum over K split into parts added with beta 1 is the whole product, bit for
// bit. BLAS gives none of these in general (a part of a product may take another kernel).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "ops/kernels/gemm.hpp"
#include "platform/execution.hpp"
#include "tapegrad.hpp"

using namespace tapegrad;

namespace {

template <class T>
std::vector<T> random_values(std::size_t n, std::uint64_t seed) {
  Generator g(seed);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(g.normal());
  return v;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// op(A) (M x K) @ op(B) (K x N) with each operand stored as the flags say.
struct Product {
  bool ta, tb;
  std::size_t M, N, K;
  std::size_t lda() const { return ta ? M : K; }
  std::size_t ldb() const { return tb ? K : N; }
};

template <class T>
void check_parts_equal_whole(const Product& p) {
  INFO("ta " << p.ta << " tb " << p.tb << " M " << p.M << " N " << p.N << " K " << p.K);
  const std::vector<T> A = random_values<T>(p.M * p.K, 1), B = random_values<T>(p.K * p.N, 2);
  kernels::ReferenceProductsGuard reference;
  std::vector<T> whole(p.M * p.N);
  kernels::gemm<T>(p.ta, p.tb, p.M, p.N, p.K, T(1), A.data(), B.data(), T(0), whole.data());
  // against a long double sum of the same products: the chain rounds K times
  for (std::size_t i = 0; i < p.M; ++i)
    for (std::size_t j = 0; j < p.N; ++j) {
      long double s = 0;
      for (std::size_t k = 0; k < p.K; ++k)
        s += static_cast<long double>(p.ta ? A[k * p.lda() + i] : A[i * p.lda() + k]) *
             (p.tb ? B[j * p.ldb() + k] : B[k * p.ldb() + j]);
      CHECK(static_cast<double>(whole[i * p.N + j]) ==
            Approx(static_cast<double>(s)).margin(std::is_same_v<T, float> ? 1e-4 : 1e-12));
    }
  // rows in blocks of 3 (the last shorter, one of them a single row: BLAS's gemv case)
  std::vector<T> parts(p.M * p.N);
  for (std::size_t r = 0; r < p.M; r += 3) {
    const std::size_t m = std::min<std::size_t>(3, p.M - r);
    kernels::gemm_strided<T>(p.ta, p.tb, m, p.N, p.K, T(1), p.ta ? A.data() + r : A.data() + r * p.lda(),
                             p.lda(), B.data(), p.ldb(), T(0), parts.data() + r * p.N, p.N);
  }
  CHECK(same_bits(parts, whole));
  // columns in blocks of 5
  std::fill(parts.begin(), parts.end(), T(0));
  for (std::size_t c = 0; c < p.N; c += 5) {
    const std::size_t n = std::min<std::size_t>(5, p.N - c);
    kernels::gemm_strided<T>(p.ta, p.tb, p.M, n, p.K, T(1), A.data(), p.lda(),
                             p.tb ? B.data() + c * p.ldb() : B.data() + c, p.ldb(), T(0),
                             parts.data() + c, p.N);
  }
  CHECK(same_bits(parts, whole));
  // K in parts of 4, the first with beta 0 and the rest added with beta 1
  std::fill(parts.begin(), parts.end(), T(-7));
  for (std::size_t k = 0; k < p.K; k += 4) {
    const std::size_t kk = std::min<std::size_t>(4, p.K - k);
    kernels::gemm_strided<T>(p.ta, p.tb, p.M, p.N, kk, T(1),
                             p.ta ? A.data() + k * p.lda() : A.data() + k, p.lda(),
                             p.tb ? B.data() + k : B.data() + k * p.ldb(), p.ldb(),
                             k == 0 ? T(0) : T(1), parts.data(), p.N);
  }
  CHECK(same_bits(parts, whole));
  // the same whole product split over 2 threads (the pool threads take the setting)
  set_num_threads(2);
  std::vector<T> threaded(p.M * p.N);
  kernels::gemm<T>(p.ta, p.tb, p.M, p.N, p.K, T(1), A.data(), B.data(), T(0), threaded.data());
  set_num_threads(1);
  CHECK(same_bits(threaded, whole));
}

}  // namespace

TEST_CASE("reference products: each number is one FMA chain whatever the block or thread count",
          "[reference_products]") {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      // large enough to be split over threads (4e6 flops), shapes off every SIMD width
      check_parts_equal_whole<double>({ta, tb, 37, 171, 330});
      check_parts_equal_whole<float>({ta, tb, 37, 171, 330});
      check_parts_equal_whole<double>({ta, tb, 1, 19, 23});
    }
}

TEST_CASE("reference products: the guard is the caller's, restored after it", "[reference_products]") {
  CHECK_FALSE(kernels::reference_products());
  {
    kernels::ReferenceProductsGuard on;
    CHECK(kernels::reference_products());
    {
      kernels::ReferenceProductsGuard nested;
      CHECK(kernels::reference_products());
    }
    CHECK(kernels::reference_products());
  }
  CHECK_FALSE(kernels::reference_products());
}
