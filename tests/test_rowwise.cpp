// The row kernels under softmax and the fused attention (ops/kernels/rowwise.*,
// ops/kernels/libm_exp.*): the vectorised exp of a row's tail against std::exp itself, bit
// for bit, and softmax over many short rows at once against the same rows one at a time
// and against a softmax in long double; cross entropy's log-sum-exp and softmax rows against
// long double; the soft-cap against tanh in double.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "platform/simd.hpp"
#include "ops/kernels/libm_exp.hpp"
#include "ops/kernels/rowwise.hpp"
#include "tapegrad.hpp"

using namespace tapegrad;

namespace {

float float_of_bits(std::uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
std::uint32_t bits_of(float f) {
  std::uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  return bits;
}

// glibc on x86-64 picks its expf for CPUs with FMA and AVX2 at run time; exp_as_std_inplace
// fuses its products when compiled for FMA (the default build, -march=native). Where the two
// choices differ, the results may differ in the last bit; where they agree, they are the
// same. Elsewhere (another CPU family) only the 1-ulp bound is checked.
bool glibc_and_build_agree_on_fma() {
#if defined(__x86_64__)
#if defined(__FMA__)
  const bool built_with_fma = true;
#else
  const bool built_with_fma = false;
#endif
  __builtin_cpu_init();
  const bool glibc_uses_fma = __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
  return built_with_fma == glibc_uses_fma;
#else
  return false;
#endif
}

// Distance in units in the last place between two finite floats of the same sign.
long ulps_apart(float a, float b) {
  return std::labs(long(bits_of(a)) - long(bits_of(b)));
}

// Checks exp_as_std_inplace on `inputs`, taken in pieces of 1, 2, ... 19 elements (every
// remainder of a SIMD width of 4, 8 or 16 doubles), against std::exp one by one.
void check_against_std_exp(const std::vector<float>& inputs, bool exact) {
  std::vector<float> got = inputs;
  for (std::size_t i = 0, piece = 1; i < got.size(); i += piece, piece = piece % 19 + 1)
    kernels::exp_as_std_inplace(got.data() + i, std::min(piece, got.size() - i));
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const float want = std::exp(inputs[i]);
    const bool same = bits_of(got[i]) == bits_of(want) ||
                      (std::isnan(got[i]) && std::isnan(want)) ||
                      (!exact && std::isfinite(want) && ulps_apart(got[i], want) <= 1);
    if (!same && ++mismatches <= 5)
      FAIL_CHECK("exp(" << std::hexfloat << inputs[i] << ") = " << got[i] << ", std::exp gives "
                        << want);
  }
  CHECK(mismatches == 0);
}

}  // namespace

TEST_CASE("exp_as_std_inplace gives std::exp's float results bit for bit", "[rowwise][exp]") {
  const bool exact = glibc_and_build_agree_on_fma();
  INFO("exact comparison: " << exact);
  SECTION("every 2039th bit pattern: all signs, exponents, subnormals, infinities, nans") {
    std::vector<float> inputs;
    for (std::uint64_t bits = 0; bits < (std::uint64_t(1) << 32); bits += 2039)
      inputs.push_back(float_of_bits(std::uint32_t(bits)));
    check_against_std_exp(inputs, exact);
  }
  SECTION("softmax's inputs: every float in [-20, 0] near a multiple of ln2/32") {
    // x * 32/ln2 rounds to k there, the table index changes, and the reduced argument r is
    // largest; the float grid is dense enough that neighbours cover both sides
    std::vector<float> inputs;
    for (int k = -923; k <= 0; ++k) {
      const float centre = float(k * std::log(2.0) / 32.0);
      float x = centre;
      for (int i = 0; i < 64; ++i) x = std::nextafter(x, -1.0f);
      for (int i = 0; i < 128; ++i, x = std::nextafter(x, 1.0f)) inputs.push_back(x);
    }
    check_against_std_exp(inputs, exact);
  }
  SECTION("glibc's special cases and their edges") {
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<float> inputs = {0.0f, -0.0f, inf, -inf, std::nanf(""), -std::nanf(""),
                                 88.0f, -88.0f, 0x1.62e42ep6f, 0x1.62e430p6f, -0x1.9fe368p6f,
                                 -0x1.9fe36ap6f, -0x1.9d1d9ep6f, -0x1.9d1da0p6f,
                                 std::numeric_limits<float>::denorm_min(),
                                 -std::numeric_limits<float>::max()};
    for (float x : {88.0f, -88.0f, -0x1.9d1d9ep6f})
      for (int i = 0; i < 8; ++i) inputs.push_back(x = std::nextafter(x, 0.0f));
    check_against_std_exp(inputs, exact);
  }
}

// Every one of the 2^32 floats (about a minute; hidden, and tagged only [exhaustive] so that
// "[rowwise]" does not run it: tapegrad_tests "[exhaustive]" after touching the kernel).
// Run on this project's machines: no mismatch.
TEST_CASE("exp_as_std_inplace equals std::exp on every float", "[.exhaustive]") {
  const bool exact = glibc_and_build_agree_on_fma();
  INFO("exact comparison: " << exact);
  std::vector<float> inputs(std::size_t(1) << 24);
  for (std::uint64_t base = 0; base < (std::uint64_t(1) << 32); base += inputs.size()) {
    for (std::size_t i = 0; i < inputs.size(); ++i)
      inputs[i] = float_of_bits(std::uint32_t(base + i));
    check_against_std_exp(inputs, exact);
  }
}

TEMPLATE_TEST_CASE("softmax rows shorter than one vector are std::exp's numbers, summed in order",
                   "[rowwise][softmax]", float, double) {
  // Such a row is all tail, so its result is exactly that of the plain loop below: the max,
  // exp(x - max) by std::exp, the sum from left to right, one division, the products
  // (within 4 eps where the vectorised exp may differ from std::exp in the last bit).
  using T = TestType;
  const bool exact = !std::is_same<T, float>::value || glibc_and_build_agree_on_fma();
  constexpr std::size_t W = xsimd::batch<T>::size;
  const T inf = std::numeric_limits<T>::infinity();
  Generator gen(7);
  for (std::size_t L = 1; L < W; ++L)
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<T> row(L);
      for (T& v : row) v = T(gen.uniform(-40.0, 40.0));
      if (trial % 5 == 1) row[trial % L] = -inf;  // a masked entry
      if (trial % 7 == 2) row[0] = T(0), row[L - 1] = T(-0.0);
      T m = -inf;
      for (T v : row) m = v > m ? v : m;
      // a row of nothing but -inf is plain softmax's 0/0: NaN (zeroing a row the mask hides
      // entirely is the caller's job)
      std::vector<T> want(L, std::numeric_limits<T>::quiet_NaN());
      if (m != -inf) {
        T sum = 0;
        for (std::size_t k = 0; k < L; ++k) sum += want[k] = std::exp(row[k] - m);
        for (T& v : want) v *= T(1) / sum;
      }
      std::vector<T> got = row;
      const std::size_t lengths[] = {L};
      kernels::softmax_rows_inplace(got.data(), 1, L, lengths);
      for (std::size_t k = 0; k < L; ++k) {
        INFO("L " << L << ", trial " << trial << ", k " << k << ": " << got[k] << " vs "
                  << want[k]);
        if (std::isnan(want[k]))
          REQUIRE(std::isnan(got[k]));
        else if (exact)
          REQUIRE(std::memcmp(&got[k], &want[k], sizeof(T)) == 0);
        else
          REQUIRE(std::fabs(got[k] - want[k]) <= 4 * std::numeric_limits<T>::epsilon() * want[k]);
      }
    }
}

TEMPLATE_TEST_CASE("softmax of many short rows at once equals the rows one at a time",
                   "[rowwise][softmax]", float, double) {
  using T = TestType;
  const T inf = std::numeric_limits<T>::infinity();
  // rows of every length from 0 to 70 (short rows are grouped, long ones are not), with
  // masked (-inf) entries, a row of nothing but -inf (NaN, as plain softmax) and a row of
  // equal values; the space
  // between rows (stride > length) must not be touched
  for (std::size_t stride : {std::size_t(16), std::size_t(33), std::size_t(71)}) {
    const std::size_t count = 2 * stride + 3;
    std::vector<std::size_t> lengths(count);
    std::vector<T> rows(count * stride);
    Generator gen(stride);
    for (std::size_t r = 0; r < count; ++r) {
      lengths[r] = (r * 7 + 3) % (stride + 1);
      for (std::size_t k = 0; k < stride; ++k) {
        T& v = rows[r * stride + k];
        v = T(gen.uniform(-30.0, 30.0));
        if (r % 5 == 1 && k % 3 == 0) v = -inf;
        if (r == 4) v = -inf;
        if (r == 6) v = T(2.5);
      }
    }
    std::vector<T> grouped = rows, alone = rows;
    kernels::softmax_rows_inplace(grouped.data(), count, stride, lengths.data());
    for (std::size_t r = 0; r < count; ++r)
      kernels::softmax_row_inplace(alone.data() + r * stride, lengths[r]);
    for (std::size_t r = 0; r < count; ++r) {
      INFO("stride " << stride << ", row " << r << " of length " << lengths[r]);
      long double m = -inf, sum = 0;
      for (std::size_t k = 0; k < lengths[r]; ++k)
        m = std::max<long double>(m, rows[r * stride + k]);
      for (std::size_t k = 0; k < lengths[r]; ++k)
        sum += m == -inf ? 0 : std::exp((long double)rows[r * stride + k] - m);
      for (std::size_t k = 0; k < stride; ++k) {
        const std::size_t i = r * stride + k;
        // the same arithmetic, row by row
        REQUIRE((grouped[i] == alone[i] || (std::isnan(grouped[i]) && std::isnan(alone[i]))));
        if (k >= lengths[r]) {
          REQUIRE(std::memcmp(&grouped[i], &rows[i], sizeof(T)) == 0);  // beyond: untouched
          continue;
        }
        if (m == -inf) {  // 0/0
          REQUIRE(std::isnan(grouped[i]));
          continue;
        }
        const long double want = std::exp((long double)rows[i] - m) / sum;
        REQUIRE(std::fabs(grouped[i] - want) <= 32 * std::numeric_limits<T>::epsilon() * want);
      }
    }
  }
}

TEMPLATE_TEST_CASE("logsumexp_row and softmax_row_from_lse (cross entropy's rows) against long double",
                   "[rowwise][softmax][cross_entropy]", float, double) {
  // rows of every length from 1 to 70 (all tail, whole vectors and a tail), logits up to 40
  // in size (exp would overflow float without the max subtracted); the softmax from the
  // log-sum-exp agrees with softmax_row_inplace and carries the scale. exp(x - lse) rounds
  // x - lse at the size of the logits (up to 80 here), hence the 128 eps
  using T = TestType;
  const T eps = std::numeric_limits<T>::epsilon();
  Generator gen(11);
  for (std::size_t L = 1; L <= 70; ++L) {
    std::vector<T> row(L);
    for (T& v : row) v = T(gen.uniform(-40.0, 40.0));
    const std::vector<T> before = row;
    long double m = row[0], sum = 0;
    for (T v : row) m = std::max<long double>(m, v);
    for (T v : row) sum += std::exp((long double)v - m);
    const long double want_lse = m + std::log(sum);
    INFO("L " << L);
    const T lse = kernels::logsumexp_row(row.data(), L);
    REQUIRE(std::memcmp(row.data(), before.data(), L * sizeof(T)) == 0);  // only read
    REQUIRE(std::fabs(lse - want_lse) <= 8 * eps * std::fabs(want_lse));
    std::vector<T> scaled(L), plain(L), inplace = row;
    kernels::softmax_row_from_lse(row.data(), L, lse, T(0.25), scaled.data());
    kernels::softmax_row_from_lse(row.data(), L, lse, T(1), plain.data());
    kernels::softmax_row_inplace(inplace.data(), L);
    for (std::size_t k = 0; k < L; ++k) {
      INFO("k " << k);
      const long double want = std::exp((long double)row[k] - want_lse);
      REQUIRE(std::fabs(plain[k] - want) <= 128 * eps * want);
      REQUIRE(std::fabs(plain[k] - inplace[k]) <= 128 * eps * want);
      REQUIRE(scaled[k] == plain[k] * T(0.25));  // a power of two: exact
    }
  }
}

TEST_CASE("softcap_inplace in float is tanh within 4 ulp and keeps its bounds, sign and NaN",
          "[rowwise][softcap]") {
  // every 331st float from 2^-20 to 16 and its negative, in pieces of 1 to 19 (every tail)
  std::vector<float> inputs;
  for (std::uint32_t b = bits_of(0x1p-20f); b <= bits_of(16.0f); b += 331) {
    inputs.push_back(float_of_bits(b));
    inputs.push_back(-float_of_bits(b));
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float special : {0.0f, -0.0f, 9.0f, 9.01f, 9.02f, 1e30f, inf, -inf}) inputs.push_back(special);
  std::vector<float> got = inputs, kept(inputs.size());
  for (std::size_t i = 0, piece = 1; i < got.size(); i += piece, piece = piece % 19 + 1) {
    const std::size_t n = std::min(piece, got.size() - i);
    kernels::softcap_inplace(got.data() + i, n, 1.0f, kept.data() + i);
  }
  long worst = 0;
  std::size_t broken = 0;  // outside [-1, 1], another sign, or not what `kept` holds
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const float want = float(std::tanh(double(inputs[i])));
    const bool sound = bits_of(got[i]) == bits_of(kept[i]) && std::fabs(got[i]) <= 1.0f &&
                       std::signbit(got[i]) == std::signbit(inputs[i]);
    if (!sound && ++broken <= 5)
      FAIL_CHECK("tanh(" << std::hexfloat << inputs[i] << ") = " << got[i] << ", kept "
                         << kept[i] << ", want " << want);
    worst = std::max(worst, ulps_apart(got[i], want));
  }
  CHECK(broken == 0);
  CHECK(worst <= 4);

  // NaN stays NaN, and the cap scales
  float row[3] = {std::numeric_limits<float>::quiet_NaN(), 2.0f, -inf};
  kernels::softcap_inplace(row, 3, 30.0f);
  CHECK(std::isnan(row[0]));
  CHECK(std::fabs(row[1] - 30.0f * std::tanh(2.0f / 30.0f)) <= 4e-6f);
  CHECK(std::fabs(row[2] + 30.0f) <= 30.0f * 8 * std::numeric_limits<float>::epsilon());
}

TEMPLATE_TEST_CASE("softcap_backward_from_scores scales by 1 - tanh^2(s / c) on every tail",
                   "[rowwise][softcap]", float, double) {
  using T = TestType;
  const T cap = T(3);
  std::mt19937 gen(7);
  // s / c on both sides of 0.625, where xsimd's tanh changes from a polynomial to exp
  std::normal_distribution<double> normal(0.0, 4.0);
  for (std::size_t n = 0; n <= 40; ++n) {
    std::vector<T> scores(n + 1), ds(n + 1);
    for (std::size_t k = 0; k <= n; ++k) {
      scores[k] = T(normal(gen));
      ds[k] = T(normal(gen));
    }
    const std::vector<T> before = ds;
    kernels::softcap_backward_from_scores(scores.data(), ds.data(), n, cap);
    for (std::size_t k = 0; k < n; ++k) {
      const double t = std::tanh(double(scores[k]) / double(cap));
      const double want = double(before[k]) * (1 - t * t);
      INFO("n " << n << ", k " << k << ", score " << scores[k]);
      CHECK(std::fabs(double(ds[k]) - want) <=
            16 * double(std::numeric_limits<T>::epsilon()) * std::fabs(double(before[k])));
    }
    CHECK(ds[n] == before[n]);  // past the row: untouched
  }
  T nan_row[2] = {std::numeric_limits<T>::quiet_NaN(), T(1)}, grad[2] = {T(1), T(1)};
  kernels::softcap_backward_from_scores(nan_row, grad, 2, cap);
  CHECK(std::isnan(grad[0]));
}
