// tapegrad's own small-product kernel (ops/kernels/gemm_small.*) against a plain loop in
// long double, for A @ B^T, A @ B and A^T @ B: every tile shape (full 8-row tiles and the
// remainder rows, two- and one-vector column tiles), strided operands, alpha, the
// streaming-store path for large results, an unaligned C, and C's old contents (NaN) never
// leaking through; then the same through kernels::gemm with 1 and 2 threads. Also the
// tensor allocator's alignment and its refusal of impossible sizes.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <new>
#include <vector>

#include "autograd/allocator.hpp"
#include "ops/kernels/gemm.hpp"
#include "ops/kernels/gemm_small.hpp"
#include "tapegrad.hpp"

using namespace tapegrad;

namespace {

template <class T>
std::vector<T> random_values(std::size_t n, Generator& g) {
  std::vector<T> v(n);
  for (T& x : v) x = T(g.uniform(-1.0, 1.0));
  return v;
}

// op(X)'s element (r, k) of a row-major X with row stride ld.
template <class T>
long double at(const T* X, std::size_t ld, bool trans, std::size_t r, std::size_t k) {
  return trans ? X[k * ld + r] : X[r * ld + k];
}

// max |C - alpha op(A) op(B)| / max |alpha op(A) op(B)| over the M x N block.
template <class T>
double relative_error(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, T alpha,
                      const T* A, std::size_t lda, const T* B, std::size_t ldb, const T* C,
                      std::size_t ldc) {
  long double worst = 0, scale = 1e-30L;
  for (std::size_t i = 0; i < M; ++i)
    for (std::size_t j = 0; j < N; ++j) {
      long double want = 0;
      for (std::size_t k = 0; k < K; ++k) want += at(A, lda, ta, i, k) * at(B, ldb, tb, k, j);
      want *= alpha;
      const long double got = C[i * ldc + j];
      if (!std::isfinite(double(got))) return std::numeric_limits<double>::infinity();
      worst = std::max(worst, std::fabs(got - want));
      scale = std::max(scale, std::fabs(want));
    }
  return double(worst / scale);
}

template <class T>
void check_case(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, T alpha,
                std::size_t pad, std::size_t c_offset, Generator& g) {
  // row-major storage of A (M x K, or K x M when transposed) and B (K x N, or N x K)
  const std::size_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + 2 * pad, ldc = N + 16 * pad;
  const std::vector<T> A = random_values<T>((ta ? K : M) * lda, g);
  const std::vector<T> B = random_values<T>((tb ? N : K) * ldb, g);
  std::vector<T, TensorAllocator<T>> C(c_offset + M * ldc, std::numeric_limits<T>::quiet_NaN());
  T* c = C.data() + c_offset;
  REQUIRE(kernels::gemm_small_applies<T>(ta, tb, M, N, K, T(0)));
  kernels::gemm_small<T>(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, c, ldc);
  INFO("ta=" << ta << " tb=" << tb << " M=" << M << " N=" << N << " K=" << K << " pad=" << pad
             << " c_offset=" << c_offset);
  const double tolerance = std::is_same_v<T, float> ? 1e-5 : 1e-13;
  CHECK(relative_error<T>(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, c, ldc) <
        tolerance);
  // the padding between rows is not written
  for (std::size_t i = 0; i < M; ++i)
    for (std::size_t j = N; j < ldc; ++j) CHECK(std::isnan(double(c[i * ldc + j])));
}

template <class T>
void check_all_shapes() {
  Generator g(23);
  const std::size_t W = 64 / sizeof(T) >= 16 ? 16 : 64 / sizeof(T);  // 16 floats or 8 doubles
  for (bool ta : {false, true})
    for (bool tb : {true, false})
      for (std::size_t M : {1, 7, 8, 9, 17, 33})
        for (std::size_t N : {W, 2 * W, 3 * W, 128 + W, std::size_t(256)})
          for (std::size_t K : {1, 5, 13, 16, 20, 32, 64})
            if (kernels::gemm_small_applies<T>(ta, tb, M, N, K, T(0)))
              check_case<T>(ta, tb, M, N, K, T(0.3), M % 2, 0, g);
  // large enough for the streaming stores, aligned and (by one element) unaligned C
  check_case<T>(false, true, 520, 512, 32, T(1), 0, 0, g);
  check_case<T>(false, true, 520, 512, 32, T(0.125), 0, 1, g);
  check_case<T>(true, true, 130, 2048, 8, T(1), 1, 0, g);
  check_case<T>(true, false, 64, 128, 64, T(1), 0, 0, g);  // attention's dK = dS^T Q
}

}  // namespace

TEST_CASE("small gemm kernel equals a long double loop for every tile shape (float)", "[gemm]") {
  check_all_shapes<float>();
}

TEST_CASE("small gemm kernel equals a long double loop for every tile shape (double)", "[gemm]") {
  check_all_shapes<double>();
}

TEST_CASE("small gemm kernel skips what a causal triangle makes zero and nothing else", "[gemm]") {
  // op(A) lower (weights @ v, ds @ k) or upper (w^T @ dy, ds^T @ q) triangular with exact
  // zeros: the skipped products must not change C; c_lower (the scores): every entry on
  // or below the diagonal right, at every tile boundary (T not a multiple of 8 or 16).
  Generator g(41);
  using kernels::Triangle;
  for (std::size_t T : {1, 7, 16, 37, 64, 130}) {
    const std::size_t N = 32;
    std::vector<double> W = random_values<double>(T * T, g), B = random_values<double>(T * N, g);
    for (std::size_t i = 0; i < T; ++i)
      for (std::size_t j = i + 1; j < T; ++j) W[i * T + j] = 0.0;  // lower triangular
    for (bool transposed : {false, true}) {
      std::vector<double> C(T * N, std::numeric_limits<double>::quiet_NaN());
      const Triangle tri = transposed ? Triangle::a_upper : Triangle::a_lower;
      REQUIRE(kernels::gemm_small_applies<double>(transposed, false, T, N, T, 0.0, tri));
      kernels::gemm_small<double>(transposed, false, T, N, T, 1.0, W.data(), T, B.data(), N,
                                  C.data(), N, tri);
      INFO("T=" << T << " transposed=" << transposed);
      CHECK(relative_error<double>(transposed, false, T, N, T, 1.0, W.data(), T, B.data(), N,
                                   C.data(), N) < 1e-13);
    }
    // c_lower: scores q @ k^T, K = 16
    const std::size_t Tc = ((T + 7) / 8) * 8;  // N must be a SIMD multiple
    const std::vector<double> Q = random_values<double>(Tc * 16, g), K = random_values<double>(Tc * 16, g);
    std::vector<double> S(Tc * Tc, std::numeric_limits<double>::quiet_NaN());
    kernels::gemm_small<double>(false, true, Tc, Tc, 16, 0.25, Q.data(), 16, K.data(), 16, S.data(),
                                Tc, Triangle::c_lower);
    double worst = 0;
    for (std::size_t i = 0; i < Tc; ++i)
      for (std::size_t j = 0; j <= i; ++j) {
        long double want = 0;
        for (std::size_t d = 0; d < 16; ++d) want += (long double)Q[i * 16 + d] * K[j * 16 + d];
        worst = std::max(worst, double(std::fabs(S[i * Tc + j] - 0.25L * want)));
      }
    INFO("c_lower T=" << Tc);
    CHECK(worst < 1e-13);
  }
}

TEST_CASE("small gemm kernel: which products it takes", "[gemm]") {
  using kernels::gemm_small_applies;
  CHECK(gemm_small_applies<float>(false, true, 8, 64, 32, 0.0f));
  CHECK(gemm_small_applies<float>(true, true, 8, 64, 32, 0.0f));
  CHECK(gemm_small_applies<float>(false, false, 64, 32, 64, 0.0f));
  CHECK(gemm_small_applies<float>(true, false, 64, 32, 64, 0.0f));
  CHECK_FALSE(gemm_small_applies<float>(false, true, 8, 64, 32, 1.0f));  // accumulates into C
  CHECK_FALSE(gemm_small_applies<float>(false, true, 8, 64, 0, 0.0f));
  CHECK_FALSE(gemm_small_applies<float>(false, true, 8, 64, kernels::kSmallK + 1, 0.0f));
  CHECK_FALSE(gemm_small_applies<float>(false, false, 1024, 1024, 64, 0.0f));  // BLAS's size
  CHECK_FALSE(gemm_small_applies<float>(false, true, 0, 64, 8, 0.0f));
  CHECK_FALSE(gemm_small_applies<float>(false, true, 8, 0, 8, 0.0f));
  CHECK_FALSE(gemm_small_applies<double>(false, true, 8, 3, 8, 0.0));  // not a SIMD multiple
}

TEST_CASE("gemm takes the small kernel or BLAS and is right either way, on 1 and 2 threads", "[gemm][threads]") {
  // kernels::gemm at attention shapes must equal the loop whichever thread split it takes
  // (rows when tall, columns when wide), with beta 0 overwriting NaN; and M = 1 by gemv.
  Generator g(31);
  struct Case { bool ta, tb; std::size_t M, N, K; };
  for (const Case& k : {Case{false, true, 512, 512, 32}, Case{false, true, 64, 2048, 16},
                        Case{false, true, 16, 16, 8}, Case{false, false, 64, 32, 64},
                        Case{true, false, 64, 32, 64}, Case{false, false, 300, 160, 200},
                        // one row (a decode step's projections): BLAS's matrix-vector product
                        Case{false, false, 1, 683, 256}, Case{false, true, 1, 64, 32},
                        Case{true, false, 1, 50, 70}, Case{true, true, 1, 40, 30}}) {
    const std::vector<float> A = random_values<float>(k.M * k.K, g);
    const std::vector<float> B = random_values<float>(k.N * k.K, g);
    const std::size_t lda = k.ta ? k.M : k.K, ldb = k.tb ? k.K : k.N;
    for (int threads : {1, 2}) {
      kernels::set_num_threads(threads);
      std::vector<float, TensorAllocator<float>> C(k.M * k.N, std::numeric_limits<float>::quiet_NaN());
      kernels::gemm<float>(k.ta, k.tb, k.M, k.N, k.K, 0.5f, A.data(), B.data(), 0.0f, C.data());
      kernels::set_num_threads(1);
      INFO("ta=" << k.ta << " tb=" << k.tb << " M=" << k.M << " N=" << k.N << " K=" << k.K
                 << " threads=" << threads);
      CHECK(relative_error<float>(k.ta, k.tb, k.M, k.N, k.K, 0.5f, A.data(), lda, B.data(), ldb,
                                  C.data(), k.N) < 1e-5);
    }
  }
}

TEST_CASE("tensor storage is 64-byte aligned and impossible sizes throw bad_alloc", "[memory]") {
  for (std::size_t n : {0, 1, 3, 15, 16, 17, 1000, 1 << 20}) {
    Array<float> a = Array<float>::from_shape({n});
    Array<double> b = Array<double>::from_shape({n, 2});
    CHECK(reinterpret_cast<std::uintptr_t>(a.data()) % kTensorAlignment == 0);
    CHECK(reinterpret_cast<std::uintptr_t>(b.data()) % kTensorAlignment == 0);
    for (std::size_t i = 0; i < n; ++i) a.data()[i] = float(i);  // all of it is writable
    if (n > 0) CHECK(a.data()[n - 1] == float(n - 1));
  }
  TensorAllocator<double> alloc;
  CHECK_THROWS_AS(alloc.allocate(std::numeric_limits<std::size_t>::max() / 4), std::bad_alloc);
  CHECK_THROWS_AS(allocate_tensor_storage(std::numeric_limits<std::size_t>::max() - 8),
                  std::bad_alloc);
  free_tensor_storage(nullptr);  // allowed, like free(nullptr)
  // no bytes: one shared, aligned placeholder instead of a malloc, and freeing it is a no-op
  void* none = allocate_tensor_storage(0);
  CHECK(none != nullptr);
  CHECK(none == allocate_tensor_storage(0));
  CHECK(reinterpret_cast<std::uintptr_t>(none) % kTensorAlignment == 0);
  free_tensor_storage(none);
  free_tensor_storage(none);
}
