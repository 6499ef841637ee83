#include "ops/kernels/libm_exp.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "platform/simd.hpp"

namespace tapegrad::kernels {

namespace {

// glibc's sysdeps/ieee754/flt-32/e_expf.c and e_exp2f_data.c (ARM optimized-routines):
// exp(x) = 2^(k/32) * 2^(r/32) with x*32/ln2 = k + r, |r| <= 1/2, 2^(k/32) from a table of
// 32 doubles and 2^(r/32) from a cubic, all in double, rounded to float once at the end.
constexpr std::uint64_t kExp2Table[32] = {
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};
constexpr double kInvLn2Scaled = 0x1.71547652b82fep+5;  // 32 / ln 2
constexpr double kShift = 0x1.8p+52;                     // adding it rounds to an integer
constexpr double kC0 = 0x1.c6af84b912394p-20, kC1 = 0x1.ebfce50fac4f3p-13,
                 kC2 = 0x1.62e42ff0c52d6p-6;

// glibc's own test for its special cases, top12(|x|) >= top12(88.0f): |x| >= 88, an
// infinity or a nan.
bool glibc_special_case(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return ((bits >> 20) & 0x7ff) >= 0x42b;
}

}  // namespace

void exp_as_std_inplace(float* x, std::size_t n) {
  using dbatch = xsimd::batch<double>;
  using ubatch = xsimd::batch<std::uint64_t>;
  constexpr std::size_t W = dbatch::size;
  for (std::size_t i0 = 0; i0 < n; i0 += W) {
    const std::size_t m = std::min(W, n - i0);
    alignas(64) double in[W] = {};
    bool to_std_exp[W];  // the lanes glibc treats specially, decided once
    for (std::size_t j = 0; j < m; ++j) {
      in[j] = x[i0 + j];
      to_std_exp[j] = glibc_special_case(x[i0 + j]);
    }
    // The same operations in the same order as glibc's expf; its x86-64 build for CPUs
    // with FMA fuses the products below exactly as xsimd::fma / fms do, and without FMA
    // both round twice.
    const dbatch xd = dbatch::load_aligned(in);
    const dbatch shifted = xsimd::fma(dbatch(kInvLn2Scaled), xd, dbatch(kShift));
    const ubatch k = xsimd::bitwise_cast<ubatch>(shifted);
    const dbatch r = xsimd::fms(dbatch(kInvLn2Scaled), xd, shifted - dbatch(kShift));
    const ubatch two_k = ubatch::gather(kExp2Table, k & ubatch(31)) + (k << 47);
    const dbatch s = xsimd::bitwise_cast<dbatch>(two_k);
    const dbatch z = xsimd::fma(dbatch(kC0), r, dbatch(kC1));
    const dbatch r2 = r * r;
    const dbatch y = xsimd::fma(z, r2, xsimd::fma(dbatch(kC2), r, dbatch(1.0))) * s;
    alignas(64) double out[W];
    y.store_aligned(out);
    for (std::size_t j = 0; j < m; ++j)
      x[i0 + j] = to_std_exp[j] ? std::exp(x[i0 + j]) : static_cast<float>(out[j]);
  }
}

void exp_as_std_inplace(double* x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) x[i] = std::exp(x[i]);
}

}  // namespace tapegrad::kernels
