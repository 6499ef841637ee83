// The bf16 matrix product (ops/kernels/gemm_bf16.*, ops/kernels/isa/, through
// ops/kernels/dispatch.hpp): float32 -> bf16 rounding on hand-built bit patterns (ties to
// even, NaN payloads, overflow), then the product against a long double loop over the
// bf16-rounded operands within float32's accumulation bound, for odd sizes, transposes,
// strides and beta, on the portable, rounded and AMX paths; the fast
// (VDPBF16PS) and portable paths against each other; 1 and 2 threads; the one-row product
// (gemv_bf16) on both of its paths.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <chrono>
#include <limits>
#include <thread>
#include <tuple>
#include <vector>

#include "helpers.hpp"
#include "ops/kernels/cpu_features.hpp"
#include "ops/kernels/dispatch.hpp"
#include "ops/kernels/gemm.hpp"
#include "ops/kernels/gemm_bf16.hpp"
#include "ops/kernels/parallel.hpp"
#include "tapegrad.hpp"

using namespace tapegrad;
using namespace tapegrad::kernels;
using namespace tapegrad::test;

namespace {

std::vector<float> random_values(std::size_t n, Generator& g) {
  std::vector<float> v(n);
  for (float& x : v) x = float(g.uniform(-1.0, 1.0));
  return v;
}

struct Case {
  bool ta, tb;
  std::size_t M, N, K, pad;  // pad: extra elements per stored row (a leading dimension > width)
};

struct Operands {
  std::vector<float> A, B;
  std::size_t lda, ldb;
};

Operands make_operands(const Case& c, Generator& g) {
  Operands o;
  o.lda = (c.ta ? c.M : c.K) + c.pad;
  o.ldb = (c.tb ? c.K : c.N) + c.pad;
  o.A = random_values((c.ta ? c.K : c.M) * o.lda, g);
  o.B = random_values((c.tb ? c.N : c.K) * o.ldb, g);
  return o;
}

float a_at(const Case& c, const Operands& o, std::size_t m, std::size_t k) {
  return c.ta ? o.A[k * o.lda + m] : o.A[m * o.lda + k];
}
float b_at(const Case& c, const Operands& o, std::size_t k, std::size_t n) {
  return c.tb ? o.B[n * o.ldb + k] : o.B[k * o.ldb + n];
}

// The worst |C - sum| / bound over the block, the sum taken in long double over the rounded
// operands, and the bound float32's for K additions: gamma_K * sum |a| |b|.
double worst_ratio_to_bound(const Case& c, const Operands& o, const std::vector<float>& C,
                            bool round_operands) {
  const double u = std::ldexp(1.0, -24), gamma = c.K * u / (1 - c.K * u);
  double worst = 0;
  for (std::size_t m = 0; m < c.M; ++m)
    for (std::size_t n = 0; n < c.N; ++n) {
      long double sum = 0, magnitude = 0;
      for (std::size_t k = 0; k < c.K; ++k) {
        float a = a_at(c, o, m, k), b = b_at(c, o, k, n);
        if (round_operands) a = round_to_bf16(a), b = round_to_bf16(b);
        sum += (long double)a * b;
        magnitude += std::fabs((long double)a * b);
      }
      const double err = double(std::fabs(C[m * c.N + n] - sum));
      worst = std::max(worst, err / (gamma * double(magnitude) + 1e-300));
    }
  return worst;
}

std::vector<float> product(const Case& c, const Operands& o, Bf16Path path) {
  std::vector<float> C(c.M * c.N, std::numeric_limits<float>::quiet_NaN());
  gemm_bf16(c.ta, c.tb, c.M, c.N, c.K, 1.0f, o.A.data(), o.lda, o.B.data(), o.ldb, 0.0f, C.data(),
            c.N, path);
  return C;
}

const std::vector<Case> kCases = {
    {false, false, 1, 1, 1, 0},   {false, false, 7, 9, 5, 0},    {false, true, 8, 32, 64, 0},
    {true, false, 9, 33, 17, 3},  {true, true, 17, 40, 31, 1},   {false, false, 24, 65, 128, 2},
    {false, true, 3, 100, 257, 0}, {true, false, 33, 31, 2, 5},    {false, false, 10, 20, 45, 1},
    // the fast path's packing of transposed operands: 16 rows of A at a time with a remainder
    // and an odd K, rows of B longer than 32 with a remainder
    {true, false, 40, 20, 67, 3}, {false, true, 5, 18, 70, 2},    {true, true, 48, 33, 99, 1},
    // AMX's whole 32 x 32 blocks, written straight to C, beside its edges
    {false, false, 70, 80, 300, 0}, {true, false, 64, 96, 129, 2}, {false, true, 96, 64, 77, 1},
    {true, true, 65, 33, 40, 0},
};

}  // namespace

TEST_CASE("bf16: float32 rounds to nearest, ties to even, on hand-built bit patterns", "[bf16]") {
  CHECK(to_bf16(1.0f) == 0x3F80);
  CHECK(to_bf16(from_bits(0x3F808000)) == 0x3F80);  // 1 + 2^-8: halfway, to the even 0x3F80
  CHECK(to_bf16(from_bits(0x3F818000)) == 0x3F82);  // halfway between 0x3F81 and 0x3F82
  CHECK(to_bf16(from_bits(0x3F808001)) == 0x3F81);  // just above halfway rounds up
  CHECK(to_bf16(from_bits(0x3F80FFFF)) == 0x3F81);  // truncation would give 0x3F80
  CHECK(to_bf16(from_bits(0xBF808000)) == 0xBF80);  // negative ties alike
  CHECK(to_bf16(from_bits(0xBF818000)) == 0xBF82);
  CHECK(to_bf16(std::numeric_limits<float>::infinity()) == 0x7F80);
  CHECK(to_bf16(-std::numeric_limits<float>::infinity()) == 0xFF80);
  CHECK(to_bf16(std::numeric_limits<float>::max()) == 0x7F80);  // above bf16's largest
  CHECK(to_bf16(from_bits(0x7F7F7FFF)) == 0x7F7F);             // bf16's largest stays finite
  // A NaN whose payload sits in the low bits only: rounding as a number would carry it
  // into an infinity, truncation would too.
  CHECK(std::isnan(from_bf16(to_bf16(from_bits(0x7F800001)))));
  CHECK(std::isnan(from_bf16(to_bf16(from_bits(0xFFFFFFFF)))));
  CHECK(from_bf16(0x4049) == 3.140625f);  // the bf16 nearest pi
  CHECK(round_to_bf16(3.14159265f) == 3.140625f);
}

TEST_CASE("bf16 gemm: the portable, rounded and AMX paths are the product of the rounded operands within float32's bound", "[bf16]") {
  Generator g(3);
  std::vector<Bf16Path> paths = {Bf16Path::portable, Bf16Path::rounded};
  if (cpu_features().amx_bf16)
    paths.push_back(Bf16Path::amx);
  else
    WARN("skipped: this CPU (or this process) has no AMX-BF16; the amx path was not tested");
  for (Bf16Path path : paths)
    for (const Case& c : kCases) {
      const Operands o = make_operands(c, g);
      const std::vector<float> C = product(c, o, path);
      INFO("path " << int(path) << " M=" << c.M << " N=" << c.N << " K=" << c.K << " ta=" << c.ta
                   << " tb=" << c.tb);
      CHECK(worst_ratio_to_bound(c, o, C, true) <= 1.0);
      // Not a float32 product: against the unrounded operands the error is bf16's (about
      // 2^-9 relative per operand), far above float32's bound once K is more than a few.
      if (c.K >= 16) CHECK(worst_ratio_to_bound(c, o, C, false) > 10.0);
    }
}

TEST_CASE("bf16: the vectorised rounding of a matrix is to_bf16's, NaN and ties included", "[bf16]") {
  // a 3 x 5 block of a row-major 3 x 7 matrix: ties both ways, NaNs, infinities, subnormals
  const std::vector<std::uint32_t> bits = {
      0x3F808000, 0x3F818000, 0x3F80FFFF, 0x7F800001, 0xFFC00001, 0, 0,
      0x7F800000, 0xFF800000, 0x7F7FFFFF, 0x00000001, 0x80008000, 0, 0,
      0x40490FDB, 0xC0490FDB, 0x3F7FFFFF, 0x00400000, 0x7FBFFFFF, 0, 0};
  std::vector<float> X(bits.size()), out, unused;
  for (std::size_t i = 0; i < bits.size(); ++i) X[i] = from_bits(bits[i]);
  // op(A) of a 3 x 1 x 5 product: A is 3 x 5 with leading dimension 7
  round_operands(false, false, 3, 1, 5, X.data(), 7, X.data(), 1, out, unused);
  for (std::size_t r = 0; r < 3; ++r)
    for (std::size_t c = 0; c < 5; ++c) {
      const float want = from_bf16(to_bf16(X[r * 7 + c])), got = out[r * 5 + c];
      INFO("bits " << std::hex << bits[r * 7 + c]);
      if (std::isnan(want)) {
        CHECK(std::isnan(got));
      } else {
        CHECK(std::memcmp(&want, &got, sizeof want) == 0);
      }
    }
}

TEST_CASE("bf16 gemm: asking for AMX where it is missing is an error, not an illegal instruction", "[bf16]") {
  if (cpu_features().amx_bf16) {
    CHECK(resolve_bf16_path(Bf16Path::automatic) == Bf16Path::amx);
    CHECK(bf16_products_are_fast());
    return;
  }
  Generator g(1);
  const Operands o = make_operands(kCases[0], g);
  CHECK_THROWS_WITH(product(kCases[0], o, Bf16Path::amx), Catch::Contains("AMX-BF16"));
  CHECK(resolve_bf16_path(Bf16Path::automatic) != Bf16Path::amx);
}

TEST_CASE("bf16 gemm: the VDPBF16PS path equals the portable path", "[bf16]") {
  if (!cpu_features().avx512_bf16) {
    WARN("skipped: this CPU has no AVX512_BF16; only the portable path was tested");
    Generator g(1);
    const Operands o = make_operands(kCases[0], g);
    CHECK_THROWS_WITH(product(kCases[0], o, Bf16Path::avx512_bf16), Catch::Contains("AVX512_BF16"));
    return;
  }
  Generator g(5);
  for (const Case& c : kCases) {
    const Operands o = make_operands(c, g);
    const std::vector<float> fast = product(c, o, Bf16Path::avx512_bf16);
    const std::vector<float> portable = product(c, o, Bf16Path::portable);
    INFO("M=" << c.M << " N=" << c.N << " K=" << c.K << " ta=" << c.ta << " tb=" << c.tb);
    CHECK(worst_ratio_to_bound(c, o, fast, true) <= 1.0);
    std::size_t differ = 0;
    for (std::size_t i = 0; i < fast.size(); ++i) differ += fast[i] != portable[i];
    CHECK(differ == 0);  // the same additions in the same order, no subnormals here
  }
}

TEST_CASE("bf16 gemm: beta, NaN inputs and threads", "[bf16]") {
  Generator g(7);
  const Case c{false, false, 70, 45, 70, 0};  // whole blocks of 32 x 32 and edges
  const Operands o = make_operands(c, g);
  const std::vector<float> once = product(c, o, Bf16Path::automatic);

  std::vector<float> half(once.size(), std::numeric_limits<float>::quiet_NaN());
  gemm_bf16(false, false, c.M, c.N, c.K, 0.5f, o.A.data(), o.lda, o.B.data(), o.ldb, 0.0f,
            half.data(), c.N);
  for (std::size_t i = 0; i < once.size(); ++i) REQUIRE(half[i] == 0.5f * once[i]);

  std::vector<float> twice = once;  // C = product + 1 * C: twice the product
  gemm_bf16(false, false, c.M, c.N, c.K, 1.0f, o.A.data(), o.lda, o.B.data(), o.ldb, 1.0f,
            twice.data(), c.N);
  for (std::size_t i = 0; i < once.size(); ++i) REQUIRE(twice[i] == 2 * once[i]);

  const int before = kernels::num_threads();
  kernels::set_num_threads(2);
  const std::vector<float> two = product(c, o, Bf16Path::automatic);
  kernels::set_num_threads(before);
  CHECK(two == once);  // a tile is one thread's: the sums do not depend on the threads

  Operands with_nan = o;
  with_nan.A[3 * with_nan.lda + 5] = std::numeric_limits<float>::quiet_NaN();  // row 3
  const std::vector<float> C = product(c, with_nan, Bf16Path::automatic);
  for (std::size_t m = 0; m < c.M; ++m)
    for (std::size_t n = 0; n < c.N; ++n) REQUIRE(std::isnan(C[m * c.N + n]) == (m == 3));
}

TEST_CASE("bf16 gemv: one row against a matrix, both paths, within float32's bound", "[bf16]") {
  Generator g(9);
  std::vector<Bf16Path> paths = {Bf16Path::portable};
  if (cpu_features().avx512_bf16)
    paths.push_back(Bf16Path::avx512_bf16);
  else
    WARN("skipped: this CPU has no AVX512_BF16; the VDPBF16PS gemv was not tested");
  for (Bf16Path path : paths)
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (const auto& [N, K, pad] : std::vector<std::tuple<std::size_t, std::size_t, std::size_t>>{
                 {1, 1, 0}, {17, 31, 2}, {64, 33, 0}, {70, 100, 1}, {3, 257, 3}}) {
          const Case c{ta, tb, 1, N, K, pad};
          const Operands o = make_operands(c, g);
          std::vector<float> C(N, std::numeric_limits<float>::quiet_NaN());
          gemv_bf16(ta, tb, N, K, 1.0f, o.A.data(), o.lda, o.B.data(), o.ldb, 0.0f, C.data(), path);
          INFO("path " << int(path) << " N=" << N << " K=" << K << " ta=" << ta << " tb=" << tb);
          CHECK(worst_ratio_to_bound(c, o, C, true) <= 1.0);
          if (K >= 16 && N >= 16) CHECK(worst_ratio_to_bound(c, o, C, false) > 10.0);  // not float32's
          std::vector<float> twice = C;  // alpha and beta: 0.5 * product + 1 * C
          gemv_bf16(ta, tb, N, K, 0.5f, o.A.data(), o.lda, o.B.data(), o.ldb, 1.0f, twice.data(), path);
          for (std::size_t n = 0; n < N; ++n) REQUIRE(twice[n] == C[n] + 0.5f * C[n]);
          // a NaN in the row reaches every output, one in B's column n only output n
          Operands nan_b = o;
          nan_b.B[tb ? (N - 1) * o.ldb : N - 1] = std::numeric_limits<float>::quiet_NaN();
          gemv_bf16(ta, tb, N, K, 1.0f, o.A.data(), o.lda, nan_b.B.data(), o.ldb, 0.0f, C.data(), path);
          for (std::size_t n = 0; n < N; ++n) REQUIRE(std::isnan(C[n]) == (n == N - 1));
          Operands nan_a = o;
          nan_a.A[0] = std::numeric_limits<float>::quiet_NaN();
          gemv_bf16(ta, tb, N, K, 1.0f, nan_a.A.data(), o.lda, o.B.data(), o.ldb, 0.0f, C.data(), path);
          for (std::size_t n = 0; n < N; ++n) REQUIRE(std::isnan(C[n]));
        }
}

TEST_CASE("bf16 precision: matmul forward and backward run the bf16 product, float64 never does", "[bf16]") {
  Tensor<float> a = random<float>({2, 9, 40}, 11), b = random<float>({40, 23}, 12);
  const auto run = [&](MatmulPrecision p) {
    MatmulPrecisionGuard guard(p);
    a.zero_grad();
    b.zero_grad();
    Tensor<float> y = matmul(a, b);
    sum(y * y).backward();
    return std::make_tuple(Array<float>(y.value()), Array<float>(a.grad()), Array<float>(b.grad()));
  };
  const auto [y32, da32, db32] = run(MatmulPrecision::f32);
  const auto [y16, da16, db16] = run(MatmulPrecision::bf16);
  CHECK(matmul_precision() == MatmulPrecision::f32);  // the guard restored it

  // forward: (18, 40) @ (40, 23), exactly the kernel's result
  std::vector<float> want(18 * 23);
  gemm_bf16(false, false, 18, 23, 40, 1.0f, a.value().data(), 40, b.value().data(), 23, 0.0f,
            want.data(), 23);
  for (std::size_t i = 0; i < want.size(); ++i) REQUIRE(y16.data()[i] == want[i]);
  // backward: dA = dY @ B^T with dY = 2 y (float32), also through the bf16 product
  std::vector<float> dy(want.size()), want_da(18 * 40);
  for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = 2 * y16.data()[i];
  gemm_bf16(false, true, 18, 40, 23, 1.0f, dy.data(), 23, b.value().data(), 23, 0.0f,
            want_da.data(), 40);
  for (std::size_t i = 0; i < want_da.size(); ++i) REQUIRE(da16.data()[i] == want_da[i]);
  // and it is not float32's: bf16's rounding moves the results by about 2^-9 relative
  double moved = 0;
  for (std::size_t i = 0; i < want.size(); ++i) moved = std::max(moved, double(std::fabs(y16.data()[i] - y32.data()[i])));
  CHECK(moved > 1e-4);

  Tensor<double> x = random<double>({5, 7}, 13), w = random<double>({7, 3}, 14);
  const Array<double> plain = matmul(x, w).value();
  MatmulPrecisionGuard bf16(MatmulPrecision::bf16);
  const bool unchanged = matmul(x, w).value() == plain;
  CHECK(unchanged);
}

TEST_CASE("bf16 precision: the kernels' pool threads compute as the calling thread asks", "[bf16]") {
  const int before = kernels::num_threads();
  kernels::set_num_threads(2);
  const std::size_t n = 64;
  std::vector<MatmulPrecision> seen(n, MatmulPrecision::f32);
  std::vector<std::thread::id> where(n);
  {
    MatmulPrecisionGuard bf16(MatmulPrecision::bf16);
    kernels::parallel_for(n, [&](std::size_t i) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));  // so the worker joins in
      seen[i] = matmul_precision();
      where[i] = std::this_thread::get_id();
    });
  }
  kernels::set_num_threads(before);
  const auto caller = std::this_thread::get_id();
  const auto on_worker = std::count_if(where.begin(), where.end(), [&](auto id) { return id != caller; });
  INFO(on_worker << " of " << n << " items ran on the pool's worker");
  CHECK(on_worker > 0);
  for (std::size_t i = 0; i < n; ++i) REQUIRE(seen[i] == MatmulPrecision::bf16);
  CHECK(matmul_precision() == MatmulPrecision::f32);
}

TEST_CASE("bf16 precision: a node's backward runs at the precision its forward ran at", "[bf16]") {
  // two products, the second of the first one's output, each with two products in its backward
  Tensor<float> a = random<float>({2, 9, 40}, 21), b = random<float>({40, 24}, 22);
  const auto loss_of = [&] {
    Tensor<float> y = matmul(a, b);
    return sum(a * matmul(y, transpose(b, {1, 0})));
  };
  const auto grads = [&](MatmulPrecision forward, MatmulPrecision backward) {
    a.zero_grad();
    b.zero_grad();
    Tensor<float> loss = [&] {
      MatmulPrecisionGuard during_forward(forward);
      return loss_of();
    }();
    MatmulPrecisionGuard during_backward(backward);
    loss.backward();
    return std::make_pair(Array<float>(a.grad()), Array<float>(b.grad()));
  };
  const auto bf16_inside = grads(MatmulPrecision::bf16, MatmulPrecision::bf16);
  const auto bf16_outside = grads(MatmulPrecision::bf16, MatmulPrecision::f32);
  const auto f32_inside = grads(MatmulPrecision::f32, MatmulPrecision::f32);
  const auto f32_in_bf16 = grads(MatmulPrecision::f32, MatmulPrecision::bf16);
  CHECK(matmul_precision() == MatmulPrecision::f32);
  const bool bf16_same = bf16_outside.first == bf16_inside.first &&
                         bf16_outside.second == bf16_inside.second;
  CHECK(bf16_same);  // bitwise: the recorded bf16, not the f32 in force at backward
  const bool f32_same = f32_in_bf16.first == f32_inside.first &&
                        f32_in_bf16.second == f32_inside.second;
  CHECK(f32_same);
  // and the two precisions do give different gradients, so the above can fail
  const bool differ = bf16_inside.first != f32_inside.first;
  CHECK(differ);
}

namespace {
int g_notices = 0;
void count_notice() { ++g_notices; }
}  // namespace

TEST_CASE("bf16 precision: the setting (platform/execution.hpp) calls the kernels' notice when bf16 is set", "[bf16]") {
  // the kernels' warning (ops/kernels/dispatch.cpp) is what setting bf16 calls first
  const Bf16Notice kernels_notice = set_bf16_notice(&count_notice);
  CHECK(kernels_notice != nullptr);
  g_notices = 0;
  {
    MatmulPrecisionGuard bf16(MatmulPrecision::bf16);
    CHECK(matmul_precision() == MatmulPrecision::bf16);
    CHECK(g_notices == 1);
    MatmulPrecisionGuard f32(MatmulPrecision::f32);  // f32 calls nothing
    CHECK(g_notices == 1);
  }
  CHECK(g_notices == 2);  // restoring bf16 on the way out is a setting of bf16 too
  CHECK(matmul_precision() == MatmulPrecision::f32);
  CHECK(set_bf16_notice(kernels_notice) == &count_notice);
  // set_thread_settings, as the pool threads take the caller's, calls nothing
  g_notices = 0;
  const ThreadSettings before = thread_settings();
  set_thread_settings({MatmulPrecision::bf16, true});
  CHECK(matmul_precision() == MatmulPrecision::bf16);
  CHECK(reference_products());
  set_thread_settings(before);
  CHECK(g_notices == 0);
  CHECK(matmul_precision() == MatmulPrecision::f32);
  CHECK(!reference_products());
  // (the pool threads taking them: "the kernels' pool threads compute as the calling thread asks")
}
