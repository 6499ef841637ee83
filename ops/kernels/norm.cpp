#include "ops/kernels/norm.hpp"

#include <cmath>

#include "ops/kernels/parallel.hpp"

// Rows are split over the kernel threads when the tensor is large. The parameter gradients
// (sums over rows) are split by columns instead, each column summed over every row in row
// order: the same numbers whatever the thread count.
//
// Row sums use `omp simd reduction`: without -ffast-math the compiler may not reorder a
// floating-point sum by itself, so a plain loop would stay scalar.

namespace tapegrad::kernels {

namespace {
// row(r) for every row, in blocks of rows over the threads when the tensor is large.
template <class Row>
void over_rows(std::size_t rows, std::size_t D, const Row& row) {
  parallel_blocks_if_worth(rows, 1, rows * D, [&](std::size_t begin, std::size_t end) {
    for (std::size_t r = begin; r < end; ++r) row(r);
  });
}

// column_block(r, begin, end) for every row r in order, over blocks of columns split between
// the threads when the tensor is large: a sum over rows then stays in row order.
template <class ColumnBlock>
void over_columns(std::size_t rows, std::size_t D, const ColumnBlock& column_block) {
  constexpr std::size_t kFloatsPerCacheLine = 16;
  parallel_blocks_if_worth(D, kFloatsPerCacheLine, rows * D, [&](std::size_t begin, std::size_t end) {
    for (std::size_t r = 0; r < rows; ++r) column_block(r, begin, end);
  });
}
}  // namespace

template <class T>
void layer_norm_forward(std::size_t rows, std::size_t D, const T* x, const T* gamma,
                        const T* beta, T eps, T* y, T* mean, T* rstd) {
  const T inv_d = T(1) / static_cast<T>(D);
  over_rows(rows, D, [&](std::size_t r) {
    const T* xr = x + r * D;
    T* yr = y + r * D;
    T s = T(0);
#pragma omp simd reduction(+ : s)
    for (std::size_t j = 0; j < D; ++j) s += xr[j];
    const T m = s * inv_d;
    // two passes (mean, then squared deviations): no cancellation as in E[x^2] - E[x]^2
    T v = T(0);
#pragma omp simd reduction(+ : v)
    for (std::size_t j = 0; j < D; ++j) v += (xr[j] - m) * (xr[j] - m);
    const T rs = T(1) / std::sqrt(v * inv_d + eps);
#pragma omp simd
    for (std::size_t j = 0; j < D; ++j) yr[j] = (xr[j] - m) * rs * gamma[j] + beta[j];
    mean[r] = m;
    rstd[r] = rs;
  });
}

template <class T>
void layer_norm_backward(std::size_t rows, std::size_t D, const T* x, const T* gamma,
                         const T* mean, const T* rstd, const T* dy, T* dx, T* dgamma,
                         T* dbeta) {
  const T inv_d = T(1) / static_cast<T>(D);
  if (dx) {
    over_rows(rows, D, [&](std::size_t r) {
      const T* xr = x + r * D;
      const T* dyr = dy + r * D;
      const T m = mean[r], rs = rstd[r];
      // y = xhat * gamma + beta, xhat = (x - mean) * rstd: the mean and the variance both
      // depend on every x of the row, which gives the two row-mean correction terms.
      T sum_g = T(0), sum_gx = T(0);
#pragma omp simd reduction(+ : sum_g, sum_gx)
      for (std::size_t j = 0; j < D; ++j) {
        const T g = dyr[j] * gamma[j];
        sum_g += g;
        sum_gx += g * (xr[j] - m) * rs;
      }
      const T mg = sum_g * inv_d, mgx = sum_gx * inv_d;
      T* dxr = dx + r * D;
#pragma omp simd
      for (std::size_t j = 0; j < D; ++j)
        dxr[j] = rs * (dyr[j] * gamma[j] - mg - (xr[j] - m) * rs * mgx);
    });
  }
  if (!dgamma && !dbeta) return;
  over_columns(rows, D, [&](std::size_t r, std::size_t begin, std::size_t end) {
    const T* xr = x + r * D;
    const T* dyr = dy + r * D;
    const T m = mean[r], rs = rstd[r];
    if (dgamma) {
#pragma omp simd
      for (std::size_t j = begin; j < end; ++j) dgamma[j] += dyr[j] * (xr[j] - m) * rs;
    }
    if (dbeta) {
#pragma omp simd
      for (std::size_t j = begin; j < end; ++j) dbeta[j] += dyr[j];
    }
  });
}

template <class T>
void rms_norm_forward(std::size_t rows, std::size_t D, const T* x, const T* gamma, T eps, T* y,
                      T* rstd) {
  const T inv_d = T(1) / static_cast<T>(D);
  over_rows(rows, D, [&](std::size_t r) {
    const T* xr = x + r * D;
    T* yr = y + r * D;
    T ss = T(0);
#pragma omp simd reduction(+ : ss)
    for (std::size_t j = 0; j < D; ++j) ss += xr[j] * xr[j];
    const T rs = T(1) / std::sqrt(ss * inv_d + eps);
#pragma omp simd
    for (std::size_t j = 0; j < D; ++j) yr[j] = xr[j] * rs * gamma[j];
    rstd[r] = rs;
  });
}

template <class T>
void rms_norm_backward(std::size_t rows, std::size_t D, const T* x, const T* gamma,
                       const T* rstd, const T* dy, T* dx, T* dgamma) {
  const T inv_d = T(1) / static_cast<T>(D);
  if (dx) {
    over_rows(rows, D, [&](std::size_t r) {
      const T* xr = x + r * D;
      const T* dyr = dy + r * D;
      const T rs = rstd[r];
      // y = xhat * gamma, xhat = x * rstd: only the mean square couples the row (no mean
      // is subtracted), hence one correction term.
      T sum_gx = T(0);
#pragma omp simd reduction(+ : sum_gx)
      for (std::size_t j = 0; j < D; ++j) sum_gx += dyr[j] * gamma[j] * xr[j] * rs;
      const T mgx = sum_gx * inv_d;
      T* dxr = dx + r * D;
#pragma omp simd
      for (std::size_t j = 0; j < D; ++j) dxr[j] = rs * (dyr[j] * gamma[j] - xr[j] * rs * mgx);
    });
  }
  if (!dgamma) return;
  over_columns(rows, D, [&](std::size_t r, std::size_t begin, std::size_t end) {
    const T* xr = x + r * D;
    const T* dyr = dy + r * D;
    const T rs = rstd[r];
#pragma omp simd
    for (std::size_t j = begin; j < end; ++j) dgamma[j] += dyr[j] * xr[j] * rs;
  });
}

#define TAPEGRAD_INSTANTIATE(T)                                                               \
  template void layer_norm_forward(std::size_t, std::size_t, const T*, const T*, const T*, T, \
                                   T*, T*, T*);                                               \
  template void layer_norm_backward(std::size_t, std::size_t, const T*, const T*, const T*,   \
                                    const T*, const T*, T*, T*, T*);                          \
  template void rms_norm_forward(std::size_t, std::size_t, const T*, const T*, T, T*, T*);    \
  template void rms_norm_backward(std::size_t, std::size_t, const T*, const T*, const T*,     \
                                  const T*, T*, T*);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad::kernels
