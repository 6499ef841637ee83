#include "ops/norm.hpp"

#include <cmath>
#include <vector>

#include "autograd/shape.hpp"
#include "autograd/tape.hpp"
#include "autograd/tensor_impl.hpp"
#include "ops/kernels/norm.hpp"

namespace tapegrad {

namespace {
// x (..., D) seen as rows of D; a parameter of the op must be exactly (D).
struct Rows {
  std::size_t rows = 0, D = 0;
};
template <class T>
Rows check_norm(const char* op, const Tensor<T>& x, const Tensor<T>& gamma,
                const Tensor<T>* beta, T eps) {
  const Shape s = x.shape();
  if (s.empty()) fail(op, "needs x of rank >= 1 (..., D), got shape ()");
  const std::size_t D = s.back();
  if (D == 0) fail(op, "cannot normalise over an empty last axis (x is {})", shape_str(s));
  if (gamma.shape() != Shape{D})
    fail(op, "gamma must have shape ({}) to match x {}, got {}", D, shape_str(s),
         gamma.shape_string());
  if (beta && beta->shape() != Shape{D})
    fail(op, "beta must have shape ({}) to match x {}, got {}", D, shape_str(s),
         beta->shape_string());
  if (!(eps >= T(0)) || !std::isfinite(eps))
    fail(op, "eps must be finite and >= 0, got {} (x is {})", eps, shape_str(s));
  return Rows{numel(s) / D, D};
}
}  // namespace

// x (..., D), gamma (D), beta (D) -> y (..., D):
//   y = (x - mean) * rstd * gamma + beta, rstd = 1 / sqrt(var + eps), over the last axis
template <class T>
Tensor<T> layer_norm(const Tensor<T>& x, const Tensor<T>& gamma, const Tensor<T>& beta, T eps) {
  const Rows r = check_norm("layer_norm", x, gamma, &beta, eps);
  Array<T> y = Array<T>::from_shape(x.shape());
  std::vector<T> mean(r.rows), rstd(r.rows);
  kernels::layer_norm_forward<T>(r.rows, r.D, x.data(), gamma.data(), beta.data(), eps,
                                 y.data(), mean.data(), rstd.data());
  // backward of y = xhat * gamma + beta (the per-row mean and rstd are kept, xhat is
  // recomputed from x):
  //   dx = rstd * (dy*gamma - mean(dy*gamma) - xhat * mean(dy*gamma*xhat))
  //   dgamma = sum over rows of dy * xhat,  dbeta = sum over rows of dy
  return record<T>(
      "layer_norm", {x, gamma, beta}, std::move(y),
      [r, mean = std::move(mean), rstd = std::move(rstd)](BackwardContext<T>& c) {
        Array<T> dx, dgamma, dbeta;
        if (c.wants(0)) dx = Array<T>::from_shape(c.input(0).shape());
        if (c.wants(1)) dgamma = zeros_array<T>({r.D});
        if (c.wants(2)) dbeta = zeros_array<T>({r.D});
        kernels::layer_norm_backward<T>(r.rows, r.D, c.input(0).data(), c.input(1).data(),
                                        mean.data(), rstd.data(), c.grad().data(),
                                        c.wants(0) ? dx.data() : nullptr,
                                        c.wants(1) ? dgamma.data() : nullptr,
                                        c.wants(2) ? dbeta.data() : nullptr);
        if (c.wants(0)) c.accumulate(0, std::move(dx));
        if (c.wants(1)) c.accumulate(1, std::move(dgamma));
        if (c.wants(2)) c.accumulate(2, std::move(dbeta));
      });
}

// x (..., D), gamma (D) -> y (..., D):
//   y = x * rstd * gamma, rstd = 1 / sqrt(mean(x^2) + eps), over the last axis
template <class T>
Tensor<T> rms_norm(const Tensor<T>& x, const Tensor<T>& gamma, T eps) {
  const Rows r = check_norm<T>("rms_norm", x, gamma, nullptr, eps);
  Array<T> y = Array<T>::from_shape(x.shape());
  std::vector<T> rstd(r.rows);
  kernels::rms_norm_forward<T>(r.rows, r.D, x.data(), gamma.data(), eps, y.data(),
                               rstd.data());
  // backward of y = xhat * gamma, xhat = x * rstd:
  //   dx = rstd * (dy*gamma - xhat * mean(dy*gamma*xhat)),  dgamma = sum over rows of dy*xhat
  return record<T>("rms_norm", {x, gamma}, std::move(y),
                   [r, rstd = std::move(rstd)](BackwardContext<T>& c) {
                     Array<T> dx, dgamma;
                     if (c.wants(0)) dx = Array<T>::from_shape(c.input(0).shape());
                     if (c.wants(1)) dgamma = zeros_array<T>({r.D});
                     kernels::rms_norm_backward<T>(r.rows, r.D, c.input(0).data(),
                                                   c.input(1).data(), rstd.data(),
                                                   c.grad().data(),
                                                   c.wants(0) ? dx.data() : nullptr,
                                                   c.wants(1) ? dgamma.data() : nullptr);
                     if (c.wants(0)) c.accumulate(0, std::move(dx));
                     if (c.wants(1)) c.accumulate(1, std::move(dgamma));
                   });
}

#define TAPEGRAD_INSTANTIATE(T)                                                        \
  template Tensor<T> layer_norm(const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, T); \
  template Tensor<T> rms_norm(const Tensor<T>&, const Tensor<T>&, T);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad
