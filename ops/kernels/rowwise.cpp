#include "ops/kernels/rowwise.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "platform/simd.hpp"
#include "ops/kernels/libm_exp.hpp"

namespace tapegrad::kernels {

// Short rows go through each phase (max, exponentials and sum, scaling) several at a
// time: one short row alone is a chain of dependent steps (max, exp, sum, divide), and a
// causal attention row at T = 16 spent most of its time waiting on it. Long rows go one at
// a time, so that each stays in L1 from one phase to the next.
std::size_t softmax_row_group(std::size_t row_length) {
  return row_length <= 64 ? kMaxSoftmaxRowGroup : 1;
}

namespace {
template <class T>
constexpr T kMasked = -std::numeric_limits<T>::infinity();  // a masked score

}  // namespace

// Four running maxima instead of one: a max is exact, so the order does not change the
// result (at most the sign of a zero maximum, which no exp(x - max) can see), and one
// chain of dependent compares was a third of a short row's time.
template <class T>
T row_max(const T* row, std::size_t L) {
  T m[4] = {kMasked<T>, kMasked<T>, kMasked<T>, kMasked<T>};
  std::size_t k = 0;
  for (; k + 4 <= L; k += 4)
    for (std::size_t j = 0; j < 4; ++j) m[j] = row[k + j] > m[j] ? row[k + j] : m[j];
  for (; k < L; ++k) m[0] = row[k] > m[0] ? row[k] : m[0];
  const T m01 = m[1] > m[0] ? m[1] : m[0], m23 = m[3] > m[2] ? m[3] : m[2];
  return m23 > m01 ? m23 : m01;
}

namespace {

// What exp_shifted writes to out: nothing, exp(row - shift), or exp(row - shift) * scale;
// kExp stores values below `floor` as 0.
enum class ExpOut { kNone, kExp, kScaledExp };

// out[k] = exp(row[k] - shift) (times scale for kScaledExp) for k < L, out may be row; returns
// sum(exp(row[k] - shift)) (not for kScaledExp): the hadd of the vector part, then the tail
// from left to right. The vector part is xsimd's exp, as glibc's std::exp stays scalar
// (it does not vectorise); the tail, shorter than a vector, gets std::exp's own numbers
// several at a time, through out or (kNone) a buffer on the stack.
template <ExpOut kOut, class T>
T exp_shifted(const T* row, std::size_t L, T shift, T scale, T* out, T floor = T(0)) {
  using batch = xsimd::batch<T>;
  constexpr std::size_t W = batch::size;
  const batch sb(shift), cb(scale), fb(floor), zero(T(0));
  batch acc(T(0));
  std::size_t k = 0;
  for (; k + W <= L; k += W) {
    const batch e = xsimd::exp(batch::load_unaligned(row + k) - sb);
    if constexpr (kOut == ExpOut::kExp) xsimd::select(e < fb, zero, e).store_unaligned(out + k);
    if constexpr (kOut == ExpOut::kScaledExp) (e * cb).store_unaligned(out + k);
    if constexpr (kOut != ExpOut::kScaledExp) acc += e;
  }
  T sum = k > 0 ? xsimd::hadd(acc) : T(0);  // the same +0 as the hadd of nothing
  T buffer[W];
  T* tail = kOut == ExpOut::kNone ? buffer : out + k;
  const std::size_t n = L - k;
  for (std::size_t j = 0; j < n; ++j) tail[j] = row[k + j] - shift;
  exp_as_std_inplace(tail, n);
  if constexpr (kOut == ExpOut::kScaledExp)
    for (std::size_t j = 0; j < n; ++j) tail[j] *= scale;
  else
    for (std::size_t j = 0; j < n; ++j) sum += tail[j];
  if constexpr (kOut == ExpOut::kExp)
    for (std::size_t j = 0; j < n; ++j) tail[j] = tail[j] < floor ? T(0) : tail[j];
  return sum;
}
}  // namespace

template <class T>
T exp_shifted_inplace(T* row, std::size_t L, T shift, T floor) {
  return exp_shifted<ExpOut::kExp>(row, L, shift, T(1), row, floor);
}

template <class T>
void softmax_rows_inplace(T* rows, std::size_t count, std::size_t stride,
                          const std::size_t* lengths, T floor) {
  using batch = xsimd::batch<T>;
  constexpr std::size_t W = batch::size;
  constexpr std::size_t kGroup = kMaxSoftmaxRowGroup;
  const std::size_t group = softmax_row_group(stride);
  for (std::size_t r0 = 0; r0 < count; r0 += group) {
    const std::size_t n = std::min(group, count - r0);
    T m[kGroup], inv[kGroup];
    for (std::size_t r = 0; r < n; ++r) {
      const T* row = rows + (r0 + r) * stride;
      const std::size_t L = lengths[r0 + r];
      m[r] = row_max(row, L);
    }
    for (std::size_t r = 0; r < n; ++r) {
      T* row = rows + (r0 + r) * stride;
      const std::size_t L = lengths[r0 + r];
      // subtracting the row max keeps every exponent <= 0, so nothing overflows;
      // exp(-inf - m) = 0 drops masked entries out of the sum. No special case for a row
      // without a finite maximum: its NaN (from a NaN, +inf or all -inf scores) is plain
      // softmax's, and only the caller knows whether the row was masked entirely.
      inv[r] = T(1) / exp_shifted<ExpOut::kExp>(row, L, m[r], T(1), row, floor);
    }
    for (std::size_t r = 0; r < n; ++r) {
      T* row = rows + (r0 + r) * stride;
      const std::size_t L = lengths[r0 + r];
      const batch ib(inv[r]);
      std::size_t k = 0;
      for (; k + W <= L; k += W) (batch::load_unaligned(row + k) * ib).store_unaligned(row + k);
      for (; k < L; ++k) row[k] *= inv[r];
    }
  }
}

template <class T>
void softmax_row_inplace(T* row, std::size_t L, T floor) {
  softmax_rows_inplace(row, 1, L, &L, floor);
}

template <class T>
T logsumexp_row(const T* row, std::size_t L) {
  const T m = row_max(row, L);
  return m + std::log(exp_shifted<ExpOut::kNone>(row, L, m, T(1), static_cast<T*>(nullptr)));
}

template <class T>
void softmax_row_from_lse(const T* row, std::size_t L, T lse, T scale, T* out) {
  exp_shifted<ExpOut::kScaledExp>(row, L, lse, scale, out);
}

template <class T>
void softmax_backward_row(const T* y, const T* dy, T* dx, std::size_t L, T scale) {
  using batch = xsimd::batch<T>;
  constexpr std::size_t W = batch::size;
  batch acc(T(0));
  std::size_t k = 0;
  for (; k + W <= L; k += W) acc += batch::load_unaligned(y + k) * batch::load_unaligned(dy + k);
  T dot = xsimd::hadd(acc);
  for (; k < L; ++k) dot += y[k] * dy[k];
  const batch db(dot), sb(scale);
  k = 0;
  for (; k + W <= L; k += W)
    (batch::load_unaligned(y + k) * (batch::load_unaligned(dy + k) - db) * sb)
        .store_unaligned(dx + k);
  for (; k < L; ++k) dx[k] = y[k] * (dy[k] - dot) * scale;
}

template <class T>
void softcap_inplace(T* row, std::size_t L, T cap, T* kept) {
  using batch = xsimd::batch<T>;
  constexpr std::size_t W = batch::size;
  const T inv = T(1) / cap;
  const batch cb(cap), ib(inv);
  std::size_t k = 0;
  for (; k + W <= L; k += W) {
    const batch capped = cb * xsimd::tanh(batch::load_unaligned(row + k) * ib);
    capped.store_unaligned(row + k);
    if (kept) capped.store_unaligned(kept + k);
  }
  if (k == L) return;
  // the tail through one more vector, so every number of the row takes the same tanh
  const batch capped = cb * xsimd::tanh(simd::load_first(row + k, L - k) * ib);
  simd::store_first(row + k, L - k, capped);
  if (kept) simd::store_first(kept + k, L - k, capped);
}

template <class T>
void softcap_backward_inplace(const T* capped, T* ds, std::size_t L, T cap) {
  const T inv = T(1) / cap;
#pragma omp simd
  for (std::size_t k = 0; k < L; ++k) {
    const T t = capped[k] * inv;
    ds[k] *= T(1) - t * t;
  }
}

template <class T>
void softcap_backward_from_scores(const T* scores, T* ds, std::size_t L, T cap) {
  using batch = xsimd::batch<T>;
  constexpr std::size_t W = batch::size;
  const batch ib(T(1) / cap), one(T(1));
  const auto derivative = [&](const batch& s) {
    const batch t = xsimd::tanh(s * ib);
    return xsimd::fnma(t, t, one);
  };
  std::size_t k = 0;
  for (; k + W <= L; k += W)
    (batch::load_unaligned(ds + k) * derivative(batch::load_unaligned(scores + k)))
        .store_unaligned(ds + k);
  if (k < L)
    simd::store_first(ds + k, L - k,
                      simd::load_first(ds + k, L - k) *
                          derivative(simd::load_first(scores + k, L - k)));
}

template <class T>
void subtract_linear_bias(T* row, std::size_t L, T slope, T distance) {
  using batch = xsimd::batch<T>;
  constexpr std::size_t W = batch::size;
  // 0, 1, ..., W - 1: the distances of a vector's keys fall by one per key (exact in T)
  alignas(64) static const auto ramp = [] {
    std::array<T, W> r{};
    for (std::size_t k = 0; k < W; ++k) r[k] = T(k);
    return r;
  }();
  batch d = batch(distance) - batch::load_aligned(ramp.data());
  const batch m(slope), step(static_cast<T>(W));
  std::size_t k = 0;
  for (; k + W <= L; k += W, d -= step)
    xsimd::fnma(m, d, batch::load_unaligned(row + k)).store_unaligned(row + k);
  if (k < L)
    simd::store_first(row + k, L - k, xsimd::fnma(m, d, simd::load_first(row + k, L - k)));
}

template void subtract_linear_bias(float*, std::size_t, float, float);
template void subtract_linear_bias(double*, std::size_t, double, double);
template void softcap_inplace(float*, std::size_t, float, float*);
template void softcap_inplace(double*, std::size_t, double, double*);
template void softcap_backward_inplace(const float*, float*, std::size_t, float);
template void softcap_backward_inplace(const double*, double*, std::size_t, double);
template void softcap_backward_from_scores(const float*, float*, std::size_t, float);
template void softcap_backward_from_scores(const double*, double*, std::size_t, double);
template float row_max(const float*, std::size_t);
template double row_max(const double*, std::size_t);
template float exp_shifted_inplace(float*, std::size_t, float, float);
template double exp_shifted_inplace(double*, std::size_t, double, double);
template void softmax_row_inplace(float*, std::size_t, float);
template void softmax_rows_inplace(float*, std::size_t, std::size_t, const std::size_t*, float);
template void softmax_rows_inplace(double*, std::size_t, std::size_t, const std::size_t*, double);
template void softmax_row_inplace(double*, std::size_t, double);
template float logsumexp_row(const float*, std::size_t);
template double logsumexp_row(const double*, std::size_t);
template void softmax_row_from_lse(const float*, std::size_t, float, float, float*);
template void softmax_row_from_lse(const double*, std::size_t, double, double, double*);
template void softmax_backward_row(const float*, const float*, float*, std::size_t, float);
template void softmax_backward_row(const double*, const double*, double*, std::size_t, double);

}  // namespace tapegrad::kernels
