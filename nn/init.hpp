#pragma once
// Initialisation, always from an explicit seeded Generator: the same seed and the same
// order of construction give the same parameters, bit for bit.
//
// GPT-2 style: every weight matrix and embedding ~ normal(0, 0.02), biases 0, norm gains
// 1; the projections that write into the residual stream (attention Wo, MLP output) use
// 0.02 / sqrt(2 * layers), because each of the 2 * layers residual additions adds its
// variance to the stream.
#include <cstddef>
#include <string>

#include "autograd/tensor.hpp"

namespace tapegrad {

// How Wq, Wk, Wv start (the saturation study compares the two):
// - gpt2: normal(0, 0.02), so unscaled scores start small;
// - variance_preserving: normal(0, variance 1/d_model), so for unit-variance input the
//   queries and keys start with unit-variance entries and unscaled scores have variance
//   d_head (the argument for dividing by sqrt(d_head)).
enum class AttentionInit { gpt2, variance_preserving };

std::string to_string(AttentionInit init);
AttentionInit parse_attention_init(const std::string& name);  // "gpt2" | "variance_preserving"

namespace init {

inline constexpr double gpt2_std = 0.02;

// 0.02 / sqrt(2 * layers)
double residual_std(std::size_t layers);
// The standard deviation of Wq, Wk, Wv under `kind` (1/sqrt(d_model) or 0.02).
double attention_std(AttentionInit kind, std::size_t d_model);

// A parameter (requires_grad) of `shape` ~ normal(0, std), drawn in row-major order.
template <class T>
Tensor<T> normal(const Shape& shape, Generator& gen, double std) {
  return Tensor<T>::randn(shape, gen, T(0), static_cast<T>(std), true);
}
// A parameter (requires_grad) of `shape` filled with `value`.
template <class T>
Tensor<T> constant(const Shape& shape, double value) {
  return Tensor<T>::full(shape, static_cast<T>(value), true);
}

}  // namespace init
}  // namespace tapegrad
