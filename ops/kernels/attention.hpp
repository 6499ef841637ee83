#pragma once
// Multi-head attention kernels that read each head in place. q, k, v and y are (B, T, D)
// row-major with D = H * dh; head h of batch item b is the (T, dh) column block starting at
// column h * dh, a matrix with leading dimension D that BLAS multiplies directly. So the
// split (reshape + transpose) and merge of heads cost no copies at all.
#include <cstddef>

namespace tapegrad::kernels {

struct HeadLayout {
  std::size_t B = 0, T = 0, H = 0, dh = 0;
  std::size_t D() const { return H * dh; }
};

// w[b,h] = softmax(scale * q_bh @ k_bh^T) with, when causal, keys j > i at -inf first.
// w is (B, H, T, T).
template <class T>
void attention_weights_forward(const HeadLayout& L, const T* q, const T* k, T scale, bool causal,
                               T* w);
// ds = w * (dw - rowsum(dw * w)) * scale; dq_bh = ds @ k_bh; dk_bh = ds^T @ q_bh.
// causal as in the forward that made w (ds is then zero above the diagonal too).
// dq / dk (B, T, D) are overwritten; either may be null when not wanted.
template <class T>
void attention_weights_backward(const HeadLayout& L, const T* q, const T* k, const T* w,
                                const T* dw, T scale, bool causal, T* dq, T* dk);

// y_bh = w_bh @ v_bh, written straight into the merged (B, T, D) layout. causal: w is zero
// above the diagonal (as the causal forward above makes it), and the products skip it.
template <class T>
void attention_mix_forward(const HeadLayout& L, const T* w, const T* v, bool causal, T* y);
// dw_bh = dy_bh @ v_bh^T (every entry); dv_bh = w_bh^T @ dy_bh; causal as in the forward.
// Outputs overwritten; either may be null.
template <class T>
void attention_mix_backward(const HeadLayout& L, const T* w, const T* v, const T* dy,
                            bool causal, T* dw, T* dv);

}  // namespace tapegrad::kernels
