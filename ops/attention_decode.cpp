#include "ops/attention_decode.hpp"

#include <cmath>

#include "autograd/tape.hpp"
#include "ops/kernels/attention_decode.hpp"

namespace tapegrad {

namespace {

// The ring and the storage: the checks check_attention_spec cannot make, because it sees
// only the held keys' logical shapes.
template <class T>
void check_ring(const Tensor<T>& q, const Shape& k, const Shape& v, bool stores_need_grad,
                const KVRing& ring) {
  const char* op = "attention_decode";
  const auto shapes = [&] {
    return fmt::format("q is {}, k_store is {}, v_store is {}, ring holds {} of {} slots from "
                       "slot {}", q.shape_string(), shape_str(k), shape_str(v),
                       ring.count, ring.capacity, ring.first_slot);
  };
  if (q.dim() != 3 || k.size() != 3 || v.size() != 3)
    fail(op, "q and the stores must be (B, T, width) ({})", shapes());
  if (k[1] != ring.capacity || v[1] != ring.capacity)
    fail(op, "the stores must have capacity={} slots ({})", ring.capacity, shapes());
  if (ring.count > ring.capacity || (ring.capacity && ring.first_slot >= ring.capacity))
    fail(op, "the ring does not fit its storage ({})", shapes());
  if (q.shape()[1] != 1) fail(op, "decodes one query per batch item, got Tq={} ({})",
                              q.shape()[1], shapes());
  if (grad_enabled() && (q.requires_grad() || stores_need_grad))
    fail(op, "is inference only (nothing is recorded for backward): call it under "
             "NoGradGuard, or use attention() to train ({})", shapes());
}

// q (B, 1, H*dh), held keys (B, n, KV*dh), values (B, n, KV*dv) -> y (B, 1, H*dv)
template <class T, class Stored>
Tensor<T> decode(const Tensor<T>& q, const Stored* k_store, const Shape& k, const Stored* v_store,
                 const Shape& v, const KVRing& ring, const AttentionSpec& spec) {
  const std::size_t B = q.shape()[0];
  const AttentionDims d = check_attention_spec("attention_decode", q.shape(),
                                               {k[0], ring.count, k[2]}, {v[0], ring.count, v[2]},
                                               spec);
  const T scale = T(d.scale);
  if (!std::isfinite(scale) || scale <= T(0))
    fail("attention_decode", "scale {} is not a positive finite number in this precision "
         "(q is {})", d.scale, q.shape_string());
  // the query is the newest of the held positions (q_offset = count - 1), so the rule's
  // band for row 0 is the held keys it sees
  const kernels::DecodeLayout L{head_layout(d), ring.capacity, ring.first_slot};
  Tensor<T> y = Tensor<T>::zeros({B, 1, d.heads * d.v_head_dim});
  kernels::attention_decode(L, q.data(), k_store, v_store, scale, y.value().data());
  return y;
}

}  // namespace

template <class T>
Tensor<T> attention_decode(const Tensor<T>& q, const Tensor<T>& k_store, const Tensor<T>& v_store,
                           const KVRing& ring, const AttentionSpec& spec) {
  check_ring(q, k_store.shape(), v_store.shape(),
             k_store.requires_grad() || v_store.requires_grad(), ring);
  return decode(q, k_store.data(), k_store.shape(), v_store.data(), v_store.shape(), ring, spec);
}

Tensor<float> attention_decode(const Tensor<float>& q, const Bf16Store& k_store,
                               const Bf16Store& v_store, const KVRing& ring,
                               const AttentionSpec& spec) {
  check_ring(q, k_store.shape, v_store.shape, false, ring);
  return decode(q, k_store.data, k_store.shape, v_store.data, v_store.shape, ring, spec);
}

template Tensor<float> attention_decode(const Tensor<float>&, const Tensor<float>&,
                                        const Tensor<float>&, const KVRing&, const AttentionSpec&);
template Tensor<double> attention_decode(const Tensor<double>&, const Tensor<double>&,
                                         const Tensor<double>&, const KVRing&,
                                         const AttentionSpec&);

}  // namespace tapegrad
