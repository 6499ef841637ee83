#pragma once
// Row-wise normalisation kernels on contiguous memory, no autograd and no xtensor. A
// tensor is viewed as `rows` contiguous rows of length D (the normalised last axis).
#include <cstddef>

namespace tapegrad::kernels {

// y = (x - mean) * rstd * gamma + beta per row, rstd = 1 / sqrt(var + eps) with the biased
// variance. Writes the per-row mean and rstd, which is all the backward needs besides x.
template <class T>
void layer_norm_forward(std::size_t rows, std::size_t D, const T* x, const T* gamma,
                        const T* beta, T eps, T* y, T* mean, T* rstd);
// xhat = (x - mean) * rstd, g = dy * gamma:
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat))   (when dx is not null)
//   dgamma += sum_rows(dy * xhat), dbeta += sum_rows(dy)  (each when not null)
template <class T>
void layer_norm_backward(std::size_t rows, std::size_t D, const T* x, const T* gamma,
                         const T* mean, const T* rstd, const T* dy, T* dx, T* dgamma, T* dbeta);

// y = x * rstd * gamma per row, rstd = 1 / sqrt(mean(x^2) + eps); writes rstd per row.
template <class T>
void rms_norm_forward(std::size_t rows, std::size_t D, const T* x, const T* gamma, T eps, T* y,
                      T* rstd);
// xhat = x * rstd, g = dy * gamma:
//   dx = rstd * (g - xhat * mean(g * xhat)), dgamma += sum_rows(dy * xhat)
template <class T>
void rms_norm_backward(std::size_t rows, std::size_t D, const T* x, const T* gamma,
                       const T* rstd, const T* dy, T* dx, T* dgamma);

}  // namespace tapegrad::kernels
