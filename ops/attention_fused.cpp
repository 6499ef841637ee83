#include "ops/attention_fused.hpp"

#include "autograd/shape.hpp"
#include "autograd/tape.hpp"
#include "autograd/tensor_impl.hpp"
#include "ops/kernels/attention.hpp"

namespace tapegrad {

namespace {
kernels::HeadLayout heads_of(const char* op, const Shape& x, std::size_t heads) {
  if (x.size() != 3) fail(op, "expects (B, T, D) projections, got {}", shape_str(x));
  if (heads == 0 || x[2] % heads != 0)
    fail(op, "D={} is not divisible by heads={} ({})", x[2], heads, shape_str(x));
  return kernels::HeadLayout{x[0], x[1], heads, x[2] / heads};
}

template <class T>
Array<T> uninitialized(const Shape& s) {
  return Array<T>::from_shape(s);
}
}  // namespace

// scores = scale * q_h @ k_h^T: q, k (B, T, D) viewed as (B, H, T, dh) -> (B, H, T, T);
// weights = softmax(scores masked to -inf above the diagonal when causal)
template <class T>
Tensor<T> attention_weights(const Tensor<T>& q, const Tensor<T>& k, std::size_t heads, T scale,
                            bool causal) {
  Shape qs = q.shape();  // moved into the backward below
  if (!k.has_shape(qs))
    fail("attention_weights", "q and k must have the same shape, got {} and {}", shape_str(qs),
         k.shape_string());
  const kernels::HeadLayout L = heads_of("attention_weights", qs, heads);
  Array<T> w = uninitialized<T>({L.B, L.H, L.T, L.T});
  kernels::attention_weights_forward<T>(L, q.data(), k.data(), scale, causal, w.data());
  // backward: ds = w * (dw - sum(dw * w)) * scale; dq = ds @ k_h; dk = ds^T @ q_h
  return record<T>("attention_weights", {q, k}, std::move(w),
                   [L, scale, causal, qs = std::move(qs)](BackwardContext<T>& c) {
                     Array<T> dq, dk;
                     if (c.wants(0)) dq = uninitialized<T>(qs);
                     if (c.wants(1)) dk = uninitialized<T>(qs);
                     kernels::attention_weights_backward<T>(
                         L, c.input(0).data(), c.input(1).data(), c.output().data(),
                         c.grad().data(), scale, causal, c.wants(0) ? dq.data() : nullptr,
                         c.wants(1) ? dk.data() : nullptr);
                     if (c.wants(0)) c.accumulate(0, std::move(dq));
                     if (c.wants(1)) c.accumulate(1, std::move(dk));
                   });
}

// y_h = w_h @ v_h: w (B, H, T, T), v (B, T, D) viewed as (B, H, T, dh) -> y (B, T, D)
template <class T>
Tensor<T> attention_mix(const Tensor<T>& weights, const Tensor<T>& v, std::size_t heads,
                        bool causal) {
  Shape vs = v.shape();  // moved into the backward below
  const kernels::HeadLayout L = heads_of("attention_mix", vs, heads);
  if (!weights.has_shape({L.B, L.H, L.T, L.T}))
    fail("attention_mix", "weights must be (B, heads, T, T) = ({},{},{},{}), got {} (v is {})",
         L.B, L.H, L.T, L.T, weights.shape_string(), shape_str(vs));
  Array<T> y = uninitialized<T>(vs);
  kernels::attention_mix_forward<T>(L, weights.data(), v.data(), causal, y.data());
  // backward: dw_h = dy_h @ v_h^T; dv_h = w_h^T @ dy_h
  return record<T>("attention_mix", {weights, v}, std::move(y),
                   [L, vs = std::move(vs), causal](BackwardContext<T>& c) {
                     Array<T> dw, dv;
                     if (c.wants(0)) dw = uninitialized<T>({L.B, L.H, L.T, L.T});
                     if (c.wants(1)) dv = uninitialized<T>(vs);
                     kernels::attention_mix_backward<T>(
                         L, c.input(0).data(), c.input(1).data(), c.grad().data(), causal,
                         c.wants(0) ? dw.data() : nullptr, c.wants(1) ? dv.data() : nullptr);
                     if (c.wants(0)) c.accumulate(0, std::move(dw));
                     if (c.wants(1)) c.accumulate(1, std::move(dv));
                   });
}

#define TAPEGRAD_INSTANTIATE(T)                                                         \
  template Tensor<T> attention_weights(const Tensor<T>&, const Tensor<T>&, std::size_t, T, \
                                       bool);                                           \
  template Tensor<T> attention_mix(const Tensor<T>&, const Tensor<T>&, std::size_t, bool);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad
