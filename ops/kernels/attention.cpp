#include "ops/kernels/attention.hpp"

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
    // scores = scale * q_bh @ k_bh^T: (T, dh) @ (dh, T) -> (T, T)
    gemm_strided<T>(false, true, Tn, Tn, L.dh, scale, qbh, D, kbh, D, T(0), wbh, Tn);
    for (std::size_t i = 0; i < Tn; ++i) {
      T* row = wbh + i * Tn;
      // causal: query i sees keys 0..i; later keys are -inf *before* the exponential
      if (causal)
        for (std::size_t j = i + 1; j < Tn; ++j) row[j] = -std::numeric_limits<T>::infinity();
      softmax_row_inplace(row, Tn);
    }
  });
}

template <class T>
void attention_weights_backward(const HeadLayout& L, const T* q, const T* k, const T* w,
                                const T* dw, T scale, T* dq, T* dk) {
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
    // dq_bh = ds @ k_bh: (T, T) @ (T, dh)
    if (dq) gemm_strided<T>(false, false, Tn, L.dh, Tn, T(1), ds.data(), Tn, k + off, D, T(0),
                            dq + off, D);
    // dk_bh = ds^T @ q_bh: (T, T)^T @ (T, dh)
    if (dk) gemm_strided<T>(true, false, Tn, L.dh, Tn, T(1), ds.data(), Tn, q + off, D, T(0),
                            dk + off, D);
  });
}

template <class T>
void attention_mix_forward(const HeadLayout& L, const T* w, const T* v, T* y) {
  const std::size_t Tn = L.T, D = L.D();
  for_each_head(L, [&](std::size_t b, std::size_t h) {
    const std::size_t off = b * Tn * D + h * L.dh;
    // y_bh = w_bh @ v_bh: (T, T) @ (T, dh) -> (T, dh), into columns h*dh.. of y
    gemm_strided<T>(false, false, Tn, L.dh, Tn, T(1), w + (b * L.H + h) * Tn * Tn, Tn, v + off,
                    D, T(0), y + off, D);
  });
}

template <class T>
void attention_mix_backward(const HeadLayout& L, const T* w, const T* v, const T* dy, T* dw,
                            T* dv) {
  const std::size_t Tn = L.T, D = L.D();
  for_each_head(L, [&](std::size_t b, std::size_t h) {
    const std::size_t off = b * Tn * D + h * L.dh;
    const std::size_t woff = (b * L.H + h) * Tn * Tn;
    // dw_bh = dy_bh @ v_bh^T: (T, dh) @ (dh, T)
    if (dw) gemm_strided<T>(false, true, Tn, Tn, L.dh, T(1), dy + off, D, v + off, D, T(0),
                            dw + woff, Tn);
    // dv_bh = w_bh^T @ dy_bh: (T, T)^T @ (T, dh)
    if (dv) gemm_strided<T>(true, false, Tn, L.dh, Tn, T(1), w + woff, Tn, dy + off, D, T(0),
                            dv + off, D);
  });
}

#define TAPEGRAD_INSTANTIATE(T)                                                                \
  template void attention_weights_forward(const HeadLayout&, const T*, const T*, T, bool, T*); \
  template void attention_weights_backward(const HeadLayout&, const T*, const T*, const T*,    \
                                           const T*, T, T*, T*);                               \
  template void attention_mix_forward(const HeadLayout&, const T*, const T*, T*);              \
  template void attention_mix_backward(const HeadLayout&, const T*, const T*, const T*, T*, T*);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad::kernels
