#pragma once
// Normalisation over the last axis, each a single fused op with its own backward.
#include "autograd/tensor.hpp"

namespace tapegrad {

// y = (x - mean) / sqrt(var + eps) * gamma + beta; x (..., D), gamma and beta (D), var
// biased (as PyTorch). Gradients for x, gamma and beta. ShapeError when x has rank 0 or
// D = 0, gamma or beta is not exactly (D), or eps is negative or not finite.
template <class T>
Tensor<T> layer_norm(const Tensor<T>& x, const Tensor<T>& gamma, const Tensor<T>& beta,
                     T eps = T(1e-5));

// y = x / sqrt(mean(x^2) + eps) * gamma; x (..., D), gamma (D); same checks as layer_norm.
template <class T>
Tensor<T> rms_norm(const Tensor<T>& x, const Tensor<T>& gamma, T eps = T(1e-5));

}  // namespace tapegrad
