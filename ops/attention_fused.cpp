#include "ops/attention_fused.hpp"

#include "autograd/shape.hpp"
#include "autograd/tape.hpp"
#include "autograd/tensor_impl.hpp"
#include "ops/kernels/attention.hpp"

namespace tapegrad {

namespace {
// The dims come from check_attention_spec; this only makes sure they describe these very
// tensors, so a mismatch is an error message and never an out-of-bounds read.
void require_shape(const char* op, const char* name, const Shape& got, const Shape& want) {
  if (got != want)
    fail(op, "{} is {} but the attention dims say {}", name, shape_str(got), shape_str(want));
}

template <class T>
Array<T> uninitialized(const Shape& s) {
  return Array<T>::from_shape(s);
}
}  // namespace

// scores = scale * q_h @ k_kv^T: q (B, Tq, H*dh) viewed (B, H, Tq, dh), k (B, Tk, KV*dh)
// viewed (B, KV, Tk, dh), kv = h / group -> (B, H, Tq, Tk); weights = softmax(scores with
// the keys outside each row's band at -inf)
template <class T>
Tensor<T> attention_weights(const Tensor<T>& q, const Tensor<T>& k, const AttentionDims& d) {
  const char* op = "attention_weights";
  Shape qs = q.shape();  // moved into the backward below
  require_shape(op, "q", qs, {d.B, d.Tq, d.heads * d.head_dim});
  require_shape(op, "k", k.shape(), {d.B, d.Tk, d.kv_heads * d.head_dim});
  const kernels::HeadLayout L = head_layout(d);
  const T scale = T(d.scale);
  Array<T> w = uninitialized<T>({d.B, d.heads, d.Tq, d.Tk});
  kernels::attention_weights_forward<T>(L, q.data(), k.data(), scale, w.data());
  // backward: ds = w * (dw - sum(dw * w)) * scale; dq_h = ds_h @ k_kv; dk_kv = sum over
  // the group's heads of ds_h^T @ q_h
  return record<T>("attention_weights", {q, k}, std::move(w),
                   [L, scale, qs = std::move(qs), ks = k.shape()](BackwardContext<T>& c) {
                     Array<T> dq, dk;
                     if (c.wants(0)) dq = uninitialized<T>(qs);
                     if (c.wants(1)) dk = uninitialized<T>(ks);
                     kernels::attention_weights_backward<T>(
                         L, c.input(0).data(), c.input(1).data(), c.output().data(),
                         c.grad().data(), scale, c.wants(0) ? dq.data() : nullptr,
                         c.wants(1) ? dk.data() : nullptr);
                     if (c.wants(0)) c.accumulate(0, std::move(dq));
                     if (c.wants(1)) c.accumulate(1, std::move(dk));
                   });
}

// y_h = w_h @ v_kv: w (B, H, Tq, Tk), v (B, Tk, KV*dv) viewed (B, KV, Tk, dv), kv = h / group
// -> y (B, Tq, H*dv)
template <class T>
Tensor<T> attention_mix(const Tensor<T>& weights, const Tensor<T>& v, const AttentionDims& d) {
  const char* op = "attention_mix";
  Shape vs = v.shape();  // moved into the backward below
  require_shape(op, "v", vs, {d.B, d.Tk, d.kv_heads * d.v_head_dim});
  require_shape(op, "weights", weights.shape(), {d.B, d.heads, d.Tq, d.Tk});
  const kernels::HeadLayout L = head_layout(d);
  Array<T> y = uninitialized<T>({d.B, d.Tq, d.heads * d.v_head_dim});
  kernels::attention_mix_forward<T>(L, weights.data(), v.data(), y.data());
  // backward: dw_h = dy_h @ v_kv^T; dv_kv = sum over the group's heads of w_h^T @ dy_h
  return record<T>("attention_mix", {weights, v}, std::move(y),
                   [L, vs = std::move(vs)](BackwardContext<T>& c) {
                     Array<T> dw, dv;
                     if (c.wants(0)) dw = uninitialized<T>({L.B, L.H, L.Tq, L.Tk});
                     if (c.wants(1)) dv = uninitialized<T>(vs);
                     kernels::attention_mix_backward<T>(
                         L, c.input(0).data(), c.input(1).data(), c.grad().data(),
                         c.wants(0) ? dw.data() : nullptr, c.wants(1) ? dv.data() : nullptr);
                     if (c.wants(0)) c.accumulate(0, std::move(dw));
                     if (c.wants(1)) c.accumulate(1, std::move(dv));
                   });
}

template <class T>
Tensor<T> attention_weights(const Tensor<T>& q, const Tensor<T>& k, std::size_t heads, T scale,
                            bool causal) {
  AttentionSpec spec;
  spec.heads = heads;
  spec.scale = double(scale);
  spec.causal = causal;
  // multi-head: k is its own v as far as the widths go
  const Shape ks = k.shape();
  return attention_weights(q, k, check_attention_spec("attention_weights", q.shape(), ks, ks, spec));
}

template <class T>
Tensor<T> attention_mix(const Tensor<T>& weights, const Tensor<T>& v, std::size_t heads,
                        bool causal) {
  AttentionSpec spec;
  spec.heads = heads;
  spec.scale = 1.0;  // the mix does not scale
  spec.causal = causal;
  // multi-head and square: the queries' shape is v's
  const Shape vs = v.shape();
  return attention_mix(weights, v, check_attention_spec("attention_mix", vs, vs, vs, spec));
}

#define TAPEGRAD_INSTANTIATE(T)                                                             \
  template Tensor<T> attention_weights(const Tensor<T>&, const Tensor<T>&,                  \
                                       const AttentionDims&);                               \
  template Tensor<T> attention_mix(const Tensor<T>&, const Tensor<T>&, const AttentionDims&); \
  template Tensor<T> attention_weights(const Tensor<T>&, const Tensor<T>&, std::size_t, T,  \
                                       bool);                                               \
  template Tensor<T> attention_mix(const Tensor<T>&, const Tensor<T>&, std::size_t, bool);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad
