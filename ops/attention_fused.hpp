#pragma once
// The two halves of attention as fused ops that read heads in place from the (B, T, width)
// projections: no split/merge copies, and grouped-query heads read their shared kv head
// without repeating it. attention(..., AttentionPath::fused) is built on them; tests prove
// them equal, forward and backward, to the composed path (reshape, transpose,
// repeat_interleave, scaled_dot_product_attention).
#include <cstddef>

#include "autograd/tensor.hpp"
#include "ops/attention_spec.hpp"

namespace tapegrad {

// q (B, Tq, heads*head_dim), k (B, Tk, kv_heads*head_dim) -> weights (B, heads, Tq, Tk):
// softmax(scale * q_h @ k_{h/group}^T, soft-capped and biased as the dims say) per query
// head over the keys the dims' mask lets row r see (causal: up to its absolute position
// q_offset + r; window: the last `window` of those); every other weight is exactly 0. `d` comes from check_attention_spec on these
// shapes (q, k and the v they will be mixed with); tensors that do not match it are a
// ShapeError.
template <class T>
Tensor<T> attention_weights(const Tensor<T>& q, const Tensor<T>& k, const AttentionDims& d);

// weights (B, heads, Tq, Tk), v (B, Tk, kv_heads*v_head_dim) -> y (B, Tq, heads*v_head_dim):
// y[..., h*dv:(h+1)*dv] = w_h @ v_{h/group}, the heads' outputs already merged. The weights
// must be zero outside d's mask, as attention_weights(q, k, d) makes them: the products skip
// those entries (the result and gradients are w @ v's all the same).
template <class T>
Tensor<T> attention_mix(const Tensor<T>& weights, const Tensor<T>& v, const AttentionDims& d);

// The multi-head forms of before (q, k, v all (B, T, D), one kv head per query head),
// checked through check_attention_spec like every other path.
template <class T>
Tensor<T> attention_weights(const Tensor<T>& q, const Tensor<T>& k, std::size_t heads, T scale,
                            bool causal);
// causal: the weights are zero above the diagonal (as attention_weights(..., causal = true)
// makes them); weights that break that promise give wrong results; leave it false for others.
template <class T>
Tensor<T> attention_mix(const Tensor<T>& weights, const Tensor<T>& v, std::size_t heads,
                        bool causal = false);

}  // namespace tapegrad
