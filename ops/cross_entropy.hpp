#pragma once
// Fused log-softmax + negative log-likelihood, with its own backward.
#include <cstdint>

#include "autograd/tensor.hpp"
#include "ops/embedding.hpp"  // Indices

namespace tapegrad {

// logits (..., C), targets (...) with values in [0, C) or == ignore_index -> scalar: the
// mean of -log softmax(logits)[target] over the positions whose target is not ignored
// (0 with zero gradient when every target is ignored). Backward: dlogits =
// dloss * (softmax(logits) - onehot(target)) / count on kept rows, 0 on ignored rows.
// ShapeError when targets' shape is not logits' shape without the last axis, or a target
// is outside [0, C) and is not ignore_index (the message names the target and C).
template <class T>
Tensor<T> cross_entropy(const Tensor<T>& logits, const Indices& targets,
                        std::int64_t ignore_index = -100);

}  // namespace tapegrad
