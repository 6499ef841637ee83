#pragma once
// Fused log-softmax + negative log-likelihood, with its own backward.
#include <cstdint>

#include "autograd/tensor.hpp"
#include "ops/embedding.hpp"  // Indices

namespace tapegrad {

// logits (..., C), targets (...) with values in [0, C) or == ignore_index -> scalar: the
// mean of -log softmax(logits)[target] over the positions whose target is not ignored
// (0 with zero gradient when every target is ignored).
template <class T>
Tensor<T> cross_entropy(const Tensor<T>& logits, const Indices& targets,
                        std::int64_t ignore_index = -100);

}  // namespace tapegrad
