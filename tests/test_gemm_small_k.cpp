// The small-K kernel behind the attention scores (ops/kernels/gemm_small_k.*) against a
// plain loop in long double: every tile shape (full 8-row tiles and the remainder rows, two-
// and one-vector column tiles), strided operands, alpha, the streaming-store path for
// large results, an unaligned C, and C's old contents (NaN) never leaking through; then
// the same through kernels::gemm with 1 and 2 threads. Also the tensor allocator's
// alignment and its refusal of impossible sizes.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <new>
#include <vector>

#include "autograd/allocator.hpp"
#include "ops/kernels/gemm.hpp"
#include "ops/kernels/gemm_small_k.hpp"
#include "tapegrad.hpp"

using namespace tapegrad;

namespace {

template <class T>
std::vector<T> random_values(std::size_t n, Generator& g) {
  std::vector<T> v(n);
  for (T& x : v) x = T(g.uniform(-1.0, 1.0));
  return v;
}

// max |C - alpha A B^T| / max |alpha A B^T| over the M x N block.
template <class T>
double relative_error(std::size_t M, std::size_t N, std::size_t K, T alpha, const T* A,
                      std::size_t lda, const T* B, std::size_t ldb, const T* C, std::size_t ldc) {
  long double worst = 0, scale = 1e-30L;
  for (std::size_t i = 0; i < M; ++i)
    for (std::size_t j = 0; j < N; ++j) {
      long double want = 0;
      for (std::size_t k = 0; k < K; ++k) want += (long double)A[i * lda + k] * B[j * ldb + k];
      want *= alpha;
      const long double got = C[i * ldc + j];
      if (!std::isfinite(double(got))) return std::numeric_limits<double>::infinity();
      worst = std::max(worst, std::fabs(got - want));
      scale = std::max(scale, std::fabs(want));
    }
  return double(worst / scale);
}

template <class T>
void check_case(std::size_t M, std::size_t N, std::size_t K, T alpha, std::size_t pad,
                std::size_t c_offset, Generator& g) {
  const std::size_t lda = K + pad, ldb = K + 2 * pad, ldc = N + 16 * pad;
  const std::vector<T> A = random_values<T>(M * lda, g), B = random_values<T>(N * ldb, g);
  std::vector<T, TensorAllocator<T>> C(c_offset + M * ldc, std::numeric_limits<T>::quiet_NaN());
  T* c = C.data() + c_offset;
  REQUIRE(kernels::small_k_applies<T>(M, N, K));
  kernels::gemm_small_k_nt<T>(M, N, K, alpha, A.data(), lda, B.data(), ldb, c, ldc);
  INFO("M=" << M << " N=" << N << " K=" << K << " pad=" << pad << " c_offset=" << c_offset);
  const double tolerance = std::is_same_v<T, float> ? 1e-5 : 1e-13;
  CHECK(relative_error<T>(M, N, K, alpha, A.data(), lda, B.data(), ldb, c, ldc) < tolerance);
  // the padding between rows is not written
  for (std::size_t i = 0; i < M; ++i)
    for (std::size_t j = N; j < ldc; ++j) CHECK(std::isnan(double(c[i * ldc + j])));
}

template <class T>
void check_all_shapes() {
  Generator g(23);
  const std::size_t W = 64 / sizeof(T) >= 16 ? 16 : 64 / sizeof(T);  // 16 floats or 8 doubles
  for (std::size_t M : {1, 7, 8, 9, 17, 33})
    for (std::size_t N : {W, 2 * W, 3 * W, 128 + W, std::size_t(256)})
      for (std::size_t K : {1, 5, 16, 32})
        if (kernels::small_k_applies<T>(M, N, K)) check_case<T>(M, N, K, T(0.3), M % 2, 0, g);
  // large enough for the streaming stores, aligned and (by one element) unaligned C
  check_case<T>(520, 512, 32, T(1), 0, 0, g);
  check_case<T>(520, 512, 32, T(0.125), 0, 1, g);
  check_case<T>(130, 2048, 8, T(1), 1, 0, g);
}

}  // namespace

TEST_CASE("small-K gemm kernel equals a long double loop for every tile shape (float)", "[gemm]") {
  check_all_shapes<float>();
}

TEST_CASE("small-K gemm kernel equals a long double loop for every tile shape (double)", "[gemm]") {
  check_all_shapes<double>();
}

TEST_CASE("small-K gemm kernel: which sizes it takes", "[gemm]") {
  CHECK(kernels::small_k_applies<float>(8, 64, 32));
  CHECK_FALSE(kernels::small_k_applies<float>(8, 64, 0));
  CHECK_FALSE(kernels::small_k_applies<float>(8, 64, kernels::kSmallK + 1));
  CHECK_FALSE(kernels::small_k_applies<float>(0, 64, 8));
  CHECK_FALSE(kernels::small_k_applies<float>(8, 0, 8));
  CHECK_FALSE(kernels::small_k_applies<double>(8, 3, 8));  // not a multiple of any SIMD width
}

TEST_CASE("gemm dispatches A B^T with small K to the kernel, on 1 and 2 threads", "[gemm][threads]") {
  // kernels::gemm(trans_b) at attention-score shapes must equal the loop whichever thread
  // split it takes (rows when tall, columns when wide), with beta 0 overwriting NaN.
  Generator g(31);
  for (auto [M, N, K] : {std::array<std::size_t, 3>{512, 512, 32}, {64, 2048, 16}, {16, 16, 8}}) {
    const std::vector<float> A = random_values<float>(M * K, g), B = random_values<float>(N * K, g);
    for (int threads : {1, 2}) {
      kernels::set_num_threads(threads);
      std::vector<float, TensorAllocator<float>> C(M * N, std::numeric_limits<float>::quiet_NaN());
      kernels::gemm<float>(false, true, M, N, K, 0.5f, A.data(), B.data(), 0.0f, C.data());
      kernels::set_num_threads(1);
      INFO("M=" << M << " N=" << N << " K=" << K << " threads=" << threads);
      CHECK(relative_error<float>(M, N, K, 0.5f, A.data(), K, B.data(), K, C.data(), N) < 1e-5);
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
}
