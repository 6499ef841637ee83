#include "ops/kernels/attention.hpp"

#include <algorithm>
#include <limits>
#include <vector>

#include "ops/kernels/gemm.hpp"
#include "ops/kernels/parallel.hpp"
#include "ops/kernels/rowwise.hpp"

namespace tapegrad::kernels {

namespace {
// Runs body(b, h) for every head of every batch item, in parallel over the (b, h) pairs
// when the work is worth a thread wake-up; each pair writes disjoint memory.
template <class F>
void for_each_head(const HeadLayout& L, F&& body) {
  const std::size_t pairs = L.B * L.H;
  const double flops = 2.0 * double(pairs) * double(L.T) * double(L.T) * double(L.dh);
  auto one = [&](std::size_t p) { body(p / L.H, p % L.H); };
  if (flops < 1.0e6) {
    for (std::size_t p = 0; p < pairs; ++p) one(p);
  } else {
    parallel_for(pairs, one);
  }
}

}  // namespace

template <class T>
void attention_weights_forward(const HeadLayout& L, const T* q, const T* k, T scale, bool causal,
                               T* w) {
  const std::size_t Tn = L.T, D = L.D();
  for_each_head(L, [&](std::size_t b, std::size_t h) {
    const T* qbh = q + b * Tn * D + h * L.dh;
    const T* kbh = k + b * Tn * D + h * L.dh;
    T* wbh = w + (b * L.H + h) * Tn * Tn;
    // scores = scale * q_bh @ k_bh^T: (T, dh) @ (dh, T) -> (T, T); causal: only j <= i
    gemm_strided<T>(false, true, Tn, Tn, L.dh, scale, qbh, D, kbh, D, T(0), wbh, Tn,
                    causal ? Triangle::c_lower : Triangle::none);
    // Row i is softmaxed over its first lengths[i] entries (all of them unless causal), as
    // many rows at a time as the softmax interleaves, right after they were prepared.
    const std::size_t block = softmax_row_group(Tn);
    std::size_t lengths[kMaxSoftmaxRowGroup];
    for (std::size_t i0 = 0; i0 < Tn; i0 += block) {
      const std::size_t rows = std::min(block, Tn - i0);
      for (std::size_t r = 0; r < rows; ++r) {
        const std::size_t i = i0 + r;
        lengths[r] = Tn;
        if (!causal) continue;
        // query i sees keys 0..i. Keys after i are set to -inf up to the next multiple of
        // 16 (whole SIMD vectors for the softmax's exponentials, which give them exactly
        // 0), and the rest of the row, never computed, is set to 0 directly.
        lengths[r] = std::min(Tn, (i + 1 + 15) / 16 * 16);
        std::fill(wbh + i * Tn + i + 1, wbh + i * Tn + lengths[r],
                  -std::numeric_limits<T>::infinity());
      }
      softmax_rows_inplace(wbh + i0 * Tn, rows, Tn, lengths);
      for (std::size_t r = 0; r < rows; ++r)
        std::fill(wbh + (i0 + r) * Tn + lengths[r], wbh + (i0 + r + 1) * Tn, T(0));
    }
  });
}

template <class T>
void attention_weights_backward(const HeadLayout& L, const T* q, const T* k, const T* w,
                                const T* dw, T scale, bool causal, T* dq, T* dk) {
  const std::size_t Tn = L.T, D = L.D();
  for_each_head(L, [&](std::size_t b, std::size_t h) {
    const std::size_t off = b * Tn * D + h * L.dh;
    const T* wbh = w + (b * L.H + h) * Tn * Tn;
    const T* dwbh = dw + (b * L.H + h) * Tn * Tn;
    // ds = softmax backward, times scale (the forward multiplied scores by it); the
    // scratch lives with the thread so large T does not fault in fresh pages per head
    thread_local std::vector<T> ds;
    ds.resize(Tn * Tn);
    for (std::size_t i = 0; i < Tn; ++i)
      softmax_backward_row(wbh + i * Tn, dwbh + i * Tn, ds.data() + i * Tn, Tn, scale);
    // ds is zero wherever w is (causal: above the diagonal)
    // dq_bh = ds @ k_bh: (T, T) @ (T, dh)
    if (dq) gemm_strided<T>(false, false, Tn, L.dh, Tn, T(1), ds.data(), Tn, k + off, D, T(0),
                            dq + off, D, causal ? Triangle::a_lower : Triangle::none);
    // dk_bh = ds^T @ q_bh: (T, T)^T @ (T, dh)
    if (dk) gemm_strided<T>(true, false, Tn, L.dh, Tn, T(1), ds.data(), Tn, q + off, D, T(0),
                            dk + off, D, causal ? Triangle::a_upper : Triangle::none);
  });
}

template <class T>
void attention_mix_forward(const HeadLayout& L, const T* w, const T* v, bool causal, T* y) {
  const std::size_t Tn = L.T, D = L.D();
  for_each_head(L, [&](std::size_t b, std::size_t h) {
    const std::size_t off = b * Tn * D + h * L.dh;
    const T* wbh = w + (b * L.H + h) * Tn * Tn;
    // y_bh = w_bh @ v_bh: (T, T) @ (T, dh) -> (T, dh), into columns h*dh.. of y
    gemm_strided<T>(false, false, Tn, L.dh, Tn, T(1), wbh, Tn, v + off, D, T(0), y + off, D,
                    causal ? Triangle::a_lower : Triangle::none);
  });
}

template <class T>
void attention_mix_backward(const HeadLayout& L, const T* w, const T* v, const T* dy,
                            bool causal, T* dw, T* dv) {
  const std::size_t Tn = L.T, D = L.D();
  for_each_head(L, [&](std::size_t b, std::size_t h) {
    const std::size_t off = b * Tn * D + h * L.dh;
    const std::size_t woff = (b * L.H + h) * Tn * Tn;
    // dw_bh = dy_bh @ v_bh^T: (T, dh) @ (dh, T), every entry (the weights' true gradient)
    if (dw) gemm_strided<T>(false, true, Tn, Tn, L.dh, T(1), dy + off, D, v + off, D, T(0),
                            dw + woff, Tn);
    // dv_bh = w_bh^T @ dy_bh: (T, T)^T @ (T, dh)
    if (dv) gemm_strided<T>(true, false, Tn, L.dh, Tn, T(1), w + woff, Tn, dy + off, D, T(0),
                            dv + off, D, causal ? Triangle::a_upper : Triangle::none);
  });
}

#define TAPEGRAD_INSTANTIATE(T)                                                                \
  template void attention_weights_forward(const HeadLayout&, const T*, const T*, T, bool, T*); \
  template void attention_weights_backward(const HeadLayout&, const T*, const T*, const T*,    \
                                           const T*, T, bool, T*, T*);                         \
  template void attention_mix_forward(const HeadLayout&, const T*, const T*, bool, T*);        \
  template void attention_mix_backward(const HeadLayout&, const T*, const T*, const T*, bool,  \
                                       T*, T*);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad::kernels
