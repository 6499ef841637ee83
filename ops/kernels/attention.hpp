#pragma once
// Attention kernels that read each head in place. q (B, Tq, H*dh), k (B, Tk, KV*dh),
// v (B, Tk, KV*dv) and y (B, Tq, H*dv) are row-major; head h of batch item b is the column
// block starting at column h * dh, a matrix whose leading dimension is the row width, which
// BLAS multiplies directly. So the split (reshape + transpose) and merge of heads cost no
// copies, and query head h reads the shared kv head h / (H / KV) in place (grouped-query
// attention never repeats K or V).
//
// The mask and the score modifiers are the layout's AttentionRule: query row r sits at
// absolute position q_offset + r and sees the keys [lo(r), hi(r)) (all Tk unless causal; a
// window of w keeps the last w of them). The weights are exactly 0 outside that band, and
// the products skip it.
#include <cstddef>

#include "ops/kernels/attention_rule.hpp"

namespace tapegrad::kernels {

struct HeadLayout : AttentionRule {
  std::size_t B = 0, Tq = 0, KV = 0, dh = 0, dv = 0;
  std::size_t group() const { return H / KV; }  // query heads per kv head
  std::size_t q_ld() const { return H * dh; }   // row widths of q, k, v and y
  std::size_t k_ld() const { return KV * dh; }
  std::size_t v_ld() const { return KV * dv; }
  std::size_t y_ld() const { return H * dv; }
  // Multi-head attention with one kv head per query head, Tq == Tk and no window: the
  // kernels run it on a path of its own (the one docs/PERFORMANCE.md measures), with the
  // rule's score modifiers; every other layout takes the general band path.
  bool square_mha() const { return H == KV && Tq == Tk && window == 0; }
};

// w[b,h] = softmax(the rule's scores from scale * q_bh @ k_b,h/group^T) over each row's
// visible keys; every other entry of w (B, H, Tq, Tk) is exactly 0.
template <class T>
void attention_weights_forward(const HeadLayout& L, const T* q, const T* k, T scale, T* w);
// ds = w * (dw - rowsum(dw * w)) * scale on the visible band (0 elsewhere), times the
// soft-cap's 1 - tanh^2 when it is on;
// dq_bh = ds @ k_kv; dk_kv = sum over the group's heads h of ds_bh^T @ q_bh.
// dq (B, Tq, H*dh) / dk (B, Tk, KV*dh) are overwritten; either may be null when not wanted.
template <class T>
void attention_weights_backward(const HeadLayout& L, const T* q, const T* k, const T* w,
                                const T* dw, T scale, T* dq, T* dk);

// y_bh = w_bh @ v_kv, written straight into the merged (B, Tq, H*dv) layout. w must be zero
// outside the layout's band (as attention_weights_forward makes it): the products skip it.
template <class T>
void attention_mix_forward(const HeadLayout& L, const T* w, const T* v, T* y);
// dw_bh = dy_bh @ v_kv^T (every entry: the weights' true gradient);
// dv_kv = sum over the group's heads h of w_bh^T @ dy_bh. Outputs overwritten; either may
// be null.
template <class T>
void attention_mix_backward(const HeadLayout& L, const T* w, const T* v, const T* dy, T* dw,
                            T* dv);

}  // namespace tapegrad::kernels
