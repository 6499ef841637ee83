#include "ops/attention_flash.hpp"

#include <array>
#include <utility>

#include "autograd/shape.hpp"
#include "autograd/tape.hpp"
#include "autograd/tensor_impl.hpp"
#include "ops/kernels/flash_attention.hpp"

namespace tapegrad {

namespace {
// The dims come from check_attention_spec; this only makes sure they describe these very
// tensors, so a mismatch is an error message and never an out-of-bounds read.
void require_shape(const char* name, const Shape& got, const Shape& want) {
  if (got != want)
    fail("flash_attention", "{} is {} but the attention dims say {}", name, shape_str(got),
         shape_str(want));
}
}  // namespace

// forward: y (B, Tq, H*dv), lse (B, H, Tq) from q (B, Tq, H*dh), k (B, Tk, KV*dh),
// v (B, Tk, KV*dv); only y and lse outlive the call.
// backward: dq (B, Tq, H*dh), dk (B, Tk, KV*dh), dv (B, Tk, KV*dv) from q, k, v, y, lse, dy.
template <class T>
Tensor<T> flash_attention(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                          const AttentionDims& d) {
  require_shape("q", q.shape(), {d.B, d.Tq, d.heads * d.head_dim});
  require_shape("k", k.shape(), {d.B, d.Tk, d.kv_heads * d.head_dim});
  require_shape("v", v.shape(), {d.B, d.Tk, d.kv_heads * d.v_head_dim});
  const kernels::HeadLayout L = head_layout(d);
  const T scale = T(d.scale);
  Array<T> y = Array<T>::from_shape({d.B, d.Tq, d.heads * d.v_head_dim});
  Array<T> lse = Array<T>::from_shape({d.B, d.heads, d.Tq});
  kernels::flash_attention_forward<T>(L, q.data(), k.data(), v.data(), scale, y.data(),
                                      lse.data());
  return record<T>(
      "flash_attention", {q, k, v}, std::move(y),
      [L, scale, lse = std::move(lse),
       shapes = std::array<Shape, 3>{q.shape(), k.shape(), v.shape()}](BackwardContext<T>& c) {
        Array<T> g[3];
        for (std::size_t i = 0; i < 3; ++i)
          if (c.wants(i)) g[i] = Array<T>::from_shape(shapes[i]);
        auto ptr = [&](std::size_t i) { return c.wants(i) ? g[i].data() : nullptr; };
        kernels::flash_attention_backward<T>(L, c.input(0).data(), c.input(1).data(),
                                             c.input(2).data(), c.output().data(), lse.data(),
                                             c.grad().data(), scale, ptr(0), ptr(1), ptr(2));
        for (std::size_t i = 0; i < 3; ++i)
          if (c.wants(i)) c.accumulate(i, std::move(g[i]));
      });
}

#define TAPEGRAD_INSTANTIATE(T)                                                      \
  template Tensor<T> flash_attention(const Tensor<T>&, const Tensor<T>&, const Tensor<T>&, \
                                     const AttentionDims&);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad
