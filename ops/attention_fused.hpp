#pragma once
// The two halves of multi-head attention as fused ops that read heads in place from the
// (B, T, D) projections (no split/merge copies). multi_head_attention is built on them;
// tests prove them equal, forward and backward, to the plain composition of
// reshape/transpose/matmul/masked_softmax.
#include "autograd/tensor.hpp"

namespace tapegrad {

// q, k (B, T, D) -> weights (B, heads, T, T) = softmax(scale * q_h @ k_h^T) per head,
// keys after the query at -inf first when causal.
template <class T>
Tensor<T> attention_weights(const Tensor<T>& q, const Tensor<T>& k, std::size_t heads, T scale,
                            bool causal);

// weights (B, heads, T, T), v (B, T, D) -> y (B, T, D): y[..., h*dh:(h+1)*dh] = w_h @ v_h,
// i.e. the heads' outputs already merged back into (B, T, D). causal says that the
// weights are zero above the diagonal, as attention_weights(..., causal = true) makes
// them: the products then skip those zeros (the result and gradients are w @ v's all the
// same). Weights that break that promise give wrong results; leave it false for others.
template <class T>
Tensor<T> attention_mix(const Tensor<T>& weights, const Tensor<T>& v, std::size_t heads,
                        bool causal = false);

}  // namespace tapegrad
