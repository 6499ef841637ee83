#pragma once
// Flash attention as one op on the tape: the forward keeps only its output and the row
// log-sum-exp (B, heads, Tq), never the (B, heads, Tq, Tk) weights, so memory is linear in
// the sequence length; the backward recomputes the weights block by block
// (ops/kernels/flash_attention.hpp). attention(..., AttentionPath::flash) is built on it and
// tested equal to the composed path, forward and backward (tests/test_attention_flash.cpp).
#include "autograd/tensor.hpp"
#include "ops/attention_spec.hpp"

namespace tapegrad {

// q (B, Tq, heads*head_dim), k (B, Tk, kv_heads*head_dim), v (B, Tk, kv_heads*v_head_dim)
// -> (B, Tq, heads*v_head_dim), the heads merged: exactly what attention_mix(
// attention_weights(q, k, d), v, d) computes. `d` comes from check_attention_spec on these
// shapes; tensors that do not match it are a ShapeError.
template <class T>
Tensor<T> flash_attention(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                          const AttentionDims& d);

}  // namespace tapegrad
