#include "ops/kernels/attention.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "ops/kernels/attention_band.hpp"
#include "ops/kernels/gemm.hpp"
#include "ops/kernels/parallel.hpp"
#include "ops/kernels/rowwise.hpp"

namespace tapegrad::kernels {

namespace {
// ---------------------------------------------------------------- square multi-head
// H == KV, Tq == Tk, no window: the path docs/PERFORMANCE.md measures, its work split by
// (b, h) pairs. v and y may be narrower or wider than q and k; the rule's score modifiers
// apply to each row's visible keys.

template <class F>
void for_each_head(const HeadLayout& L, F&& body) {
  const double flops = 2.0 * double(L.B * L.H) * double(L.Tq) * double(L.Tq) * double(L.dh);
  parallel_for_if_worth(L.B * L.H, flops, [&](std::size_t p) { body(p / L.H, p % L.H); });
}

template <class T>
void square_weights_forward(const HeadLayout& L, const T* q, const T* k, T scale, T* w) {
  const std::size_t Tn = L.Tq, D = L.q_ld();
  const bool causal = L.causal;
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
    const bool modified = L.modifies_scores();
    const T m = L.head_slope<T>(h);
    std::size_t lengths[kMaxSoftmaxRowGroup];
    for (std::size_t i0 = 0; i0 < Tn; i0 += block) {
      const std::size_t rows = std::min(block, Tn - i0);
      for (std::size_t r = 0; r < rows; ++r) {
        const std::size_t i = i0 + r;
        if (modified) L.modify_scores(wbh + i * Tn, 0, 0, L.hi(i), i, m);
        lengths[r] = Tn;
        if (!causal) continue;
        // query i sees keys 0..i. Keys after i are set to -inf up to the next multiple of
        // 16 (whole SIMD vectors for the softmax's exponentials, which give them exactly
        // 0), and the rest of the row, never computed, is set to 0 directly.
        lengths[r] = std::min(Tn, (i + 1 + 15) / 16 * 16);
        std::fill(wbh + i * Tn + i + 1, wbh + i * Tn + lengths[r],
                  -std::numeric_limits<T>::infinity());
      }
      // weights below kTinyWeight as 0: ALiBi makes far keys' weights subnormal
      softmax_rows_inplace(wbh + i0 * Tn, rows, Tn, lengths, modified ? kTinyWeight<T> : T(0));
      // the keys after the row's own 0 (the -inf padding too: a NaN row gives NaN there)
      for (std::size_t r = 0; r < rows; ++r)
        std::fill(wbh + (i0 + r) * Tn + L.hi(i0 + r), wbh + (i0 + r + 1) * Tn, T(0));
    }
  });
}

// ds (T, T) of one head times the soft-cap's derivative 1 - tanh^2(s / c) on each row's
// visible keys, from the scores s recomputed kSoftcapRows rows at a time (a block of them
// stays in L2 between its product and its use).
constexpr std::size_t kSoftcapRows = 64;

template <class T>
void scale_by_softcap_grad(const HeadLayout& L, const T* qbh, const T* kbh, T scale, T* ds) {
  const std::size_t Tn = L.Tq, D = L.q_ld();
  thread_local std::vector<T> scores;
  scores.resize(kSoftcapRows * Tn);
  for (std::size_t i0 = 0; i0 < Tn; i0 += kSoftcapRows) {
    const std::size_t rows = std::min(kSoftcapRows, Tn - i0), n = L.hi(i0 + rows - 1);
    // scores = scale * q_bh[i0:i0+rows] @ k_bh[0:n]^T: (rows, dh) @ (dh, n) -> (rows, n)
    gemm_strided<T>(false, true, rows, n, L.dh, scale, qbh + i0 * D, D, kbh, D, T(0),
                    scores.data(), n);
    for (std::size_t r = 0; r < rows; ++r)
      L.scale_grad_by_softcap_from_scores(scores.data() + r * n, ds + (i0 + r) * Tn, 0, 0,
                                          L.hi(i0 + r));
  }
}

template <class T>
void square_weights_backward(const HeadLayout& L, const T* q, const T* k, const T* w,
                             const T* dw, T scale, T* dq, T* dk) {
  const std::size_t Tn = L.Tq, D = L.q_ld();
  const bool causal = L.causal;
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
    if (L.softcap > 0) scale_by_softcap_grad(L, q + off, k + off, scale, ds.data());
    // dq_bh = ds @ k_bh: (T, T) @ (T, dh), each row over the keys it sees
    if (dq) visible_keys_product<T>(L, 0, Tn, 0, Tn, L.dh, T(1), ds.data(), Tn, k + off, D, T(0),
                                    dq + off, D, causal ? Triangle::a_lower : Triangle::none);
    // dk_bh = ds^T @ q_bh: (T, T)^T @ (T, dh)
    if (dk) gemm_strided<T>(true, false, Tn, L.dh, Tn, T(1), ds.data(), Tn, q + off, D, T(0),
                            dk + off, D, causal ? Triangle::a_upper : Triangle::none);
  });
}

template <class T>
void square_mix_forward(const HeadLayout& L, const T* w, const T* v, T* y) {
  const std::size_t Tn = L.Tq, D = L.v_ld();
  for_each_head(L, [&](std::size_t b, std::size_t h) {
    const std::size_t off = b * Tn * D + h * L.dv;
    const T* wbh = w + (b * L.H + h) * Tn * Tn;
    // y_bh = w_bh @ v_bh: (T, T) @ (T, dv) -> (T, dv), into columns h*dv.. of y
    gemm_strided<T>(false, false, Tn, L.dv, Tn, T(1), wbh, Tn, v + off, D, T(0), y + off, D,
                    L.causal ? Triangle::a_lower : Triangle::none);
  });
}

template <class T>
void square_mix_backward(const HeadLayout& L, const T* w, const T* v, const T* dy, T* dw,
                         T* dv) {
  const std::size_t Tn = L.Tq, D = L.v_ld();
  for_each_head(L, [&](std::size_t b, std::size_t h) {
    const std::size_t off = b * Tn * D + h * L.dv;
    const std::size_t woff = (b * L.H + h) * Tn * Tn;
    // dw_bh = dy_bh @ v_bh^T: (T, dv) @ (dv, T), every entry (the weights' true gradient)
    if (dw) gemm_strided<T>(false, true, Tn, Tn, L.dv, T(1), dy + off, D, v + off, D, T(0),
                            dw + woff, Tn);
    // dv_bh = w_bh^T @ dy_bh: (T, T)^T @ (T, dv)
    if (dv) gemm_strided<T>(true, false, Tn, L.dv, Tn, T(1), w + woff, Tn, dy + off, D, T(0),
                            dv + off, D, L.causal ? Triangle::a_upper : Triangle::none);
  });
}

// ---------------------------------------------------------------- banded, grouped
// Everything else: kv heads shared by a group of query heads, Tq < Tk, windows. Query rows
// are processed in blocks of kRowBlock; a block's rows together see the keys
// [lo(r0), hi(r1 - 1)), and every product runs over that key range only, so a window
// of w keys costs about (kRowBlock + w) / Tk of the full product.
constexpr std::size_t kRowBlock = 32;  // a multiple of the softmax's row group (16)

// body(r0, rows, klo, khi) for each block of query rows.
template <class F>
void for_each_row_block(const HeadLayout& L, F&& body) {
  for (std::size_t r0 = 0; r0 < L.Tq; r0 += kRowBlock) {
    const std::size_t rows = std::min(kRowBlock, L.Tq - r0);
    body(r0, rows, L.lo(r0), L.hi(r0 + rows - 1));
  }
}

// An upper bound of the products' work: the banded flops are rarely worth a wake-up less.
double banded_flops(const HeadLayout& L, std::size_t width) {
  return 2.0 * double(L.B * L.H) * double(L.Tq) * double(L.Tk) * double(width);
}

// Zeroes the (rows, width) column block at `p` of a matrix with row stride ld.
template <class T>
void zero_block(T* p, std::size_t rows, std::size_t width, std::size_t ld) {
  for (std::size_t r = 0; r < rows; ++r) std::fill(p + r * ld, p + r * ld + width, T(0));
}

// Forward pairs are (b, h): each writes only its own weights / output columns.
template <class T>
void banded_weights_forward(const HeadLayout& L, const T* q, const T* k, T scale, T* w) {
  const std::size_t Tk = L.Tk, qld = L.q_ld(), kld = L.k_ld();
  const T masked = -std::numeric_limits<T>::infinity();
  const bool modified = L.modifies_scores();
  parallel_for_if_worth(L.B * L.H, banded_flops(L, L.dh), [&](std::size_t p) {
    const std::size_t b = p / L.H, h = p % L.H, kv = h / L.group();
    const T* qbh = q + b * L.Tq * qld + h * L.dh;
    const T* kb = k + b * Tk * kld + kv * L.dh;
    T* wbh = w + p * L.Tq * Tk;
    for_each_row_block(L, [&](std::size_t r0, std::size_t rows, std::size_t klo, std::size_t khi) {
      T* wb = wbh + r0 * Tk;
      // scores = scale * q_bh[r0:r0+rows] @ k_kv[klo:khi]^T: (rows, dh) @ (dh, n) -> (rows, n)
      if (khi > klo)
        gemm_strided<T>(false, true, rows, khi - klo, L.dh, scale, qbh + r0 * qld, qld,
                        kb + klo * kld, kld, T(0), wb + klo, Tk);
      // each row's keys outside its own band -inf (exactly 0 after the softmax), then the
      // columns no row of the block sees 0 directly
      std::size_t lengths[kRowBlock];
      for (std::size_t r = 0; r < rows; ++r) {
        T* row = wb + r * Tk;
        std::fill(row + klo, row + L.lo(r0 + r), masked);
        std::fill(row + L.hi(r0 + r), row + khi, masked);
        lengths[r] = khi - klo;
      }
      if (modified) {
        const T m = L.head_slope<T>(h);
        for (std::size_t r = 0; r < rows; ++r)
          L.modify_scores(wb + r * Tk, 0, L.lo(r0 + r), L.hi(r0 + r), r0 + r, m);
      }
      // weights below kTinyWeight as 0: ALiBi makes far keys' weights subnormal
      softmax_rows_inplace(wb + klo, rows, Tk, lengths, kTinyWeight<T>);
      // every key outside the row's own band 0 (its -inf keys too: a NaN row gives NaN there)
      for (std::size_t r = 0; r < rows; ++r) {
        std::fill(wb + r * Tk, wb + r * Tk + L.lo(r0 + r), T(0));
        std::fill(wb + r * Tk + L.hi(r0 + r), wb + (r + 1) * Tk, T(0));
      }
    });
  });
}

// Backward pairs are (b, kv): dk / dv of a shared kv head sum over its group's query heads,
// so one task owns each kv head's gradient (and its heads' dq) and no two threads write
// the same memory.
template <class T>
void banded_weights_backward(const HeadLayout& L, const T* q, const T* k, const T* w,
                             const T* dw, T scale, T* dq, T* dk) {
  const std::size_t Tk = L.Tk, qld = L.q_ld(), kld = L.k_ld();
  parallel_for_if_worth(L.B * L.KV, 2 * banded_flops(L, L.dh), [&](std::size_t p) {
    const std::size_t b = p / L.KV, kv = p % L.KV;
    const T* kb = k + b * Tk * kld + kv * L.dh;
    T* dkb = dk ? dk + b * Tk * kld + kv * L.dh : nullptr;
    if (dkb) zero_block(dkb, Tk, L.dh, kld);  // accumulated below, block by block
    thread_local std::vector<T> ds, raw;      // one block's (rows, n) softmax gradient
    ds.resize(kRowBlock * Tk);                // and, under the soft-cap, its scaled scores
    const bool capped = L.softcap > 0;
    if (capped) raw.resize(kRowBlock * Tk);
    for (std::size_t g = 0; g < L.group(); ++g) {
      const std::size_t h = kv * L.group() + g;
      const T* qbh = q + b * L.Tq * qld + h * L.dh;
      T* dqbh = dq ? dq + b * L.Tq * qld + h * L.dh : nullptr;
      const T* wbh = w + (b * L.H + h) * L.Tq * Tk;
      const T* dwbh = dw + (b * L.H + h) * L.Tq * Tk;
      for_each_row_block(L, [&](std::size_t r0, std::size_t rows, std::size_t klo,
                                std::size_t khi) {
        const std::size_t n = khi - klo;
        if (n == 0) {  // no keys at all (Tk = 0): nothing reaches q
          if (dqbh) zero_block(dqbh + r0 * qld, rows, L.dh, qld);
          return;
        }
        // ds = w * (dw - rowsum(dw * w)) * scale on each row's band, 0 on the rest of the
        // block's key range (so masked entries contribute nothing, whatever dw holds there)
        for (std::size_t r = 0; r < rows; ++r) {
          const std::size_t i = r0 + r, lo = L.lo(i), hi = L.hi(i);
          T* dsr = ds.data() + r * n;
          std::fill(dsr, dsr + n, T(0));
          softmax_backward_row(wbh + i * Tk + lo, dwbh + i * Tk + lo, dsr + (lo - klo), hi - lo,
                               scale);
        }
        // under the soft-cap, d(capped)/d(scaled) = 1 - tanh^2(scaled / c) from the scores
        // recomputed
        if (capped) {
          gemm_strided<T>(false, true, rows, n, L.dh, scale, qbh + r0 * qld, qld,
                          kb + klo * kld, kld, T(0), raw.data(), n);
          for (std::size_t r = 0; r < rows; ++r)
            L.scale_grad_by_softcap_from_scores(raw.data() + r * n, ds.data() + r * n, klo,
                                                L.lo(r0 + r), L.hi(r0 + r));
        }
        // dq_bh[r0:] = ds @ k_kv[klo:khi]: (rows, n) @ (n, dh), each row over the keys it sees
        if (dqbh)
          visible_keys_product<T>(L, r0, rows, klo, n, L.dh, T(1), ds.data(), n, kb + klo * kld,
                                  kld, T(0), dqbh + r0 * qld, qld);
        // dk_kv[klo:khi] += ds^T @ q_bh[r0:]: (n, rows) @ (rows, dh)
        if (dkb)
          gemm_strided<T>(true, false, n, L.dh, rows, T(1), ds.data(), n, qbh + r0 * qld, qld,
                          T(1), dkb + klo * kld, kld);
      });
    }
  });
}

template <class T>
void banded_mix_forward(const HeadLayout& L, const T* w, const T* v, T* y) {
  const std::size_t Tk = L.Tk, vld = L.v_ld(), yld = L.y_ld();
  parallel_for_if_worth(L.B * L.H, banded_flops(L, L.dv), [&](std::size_t p) {
    const std::size_t b = p / L.H, h = p % L.H, kv = h / L.group();
    const T* wbh = w + p * L.Tq * Tk;
    const T* vb = v + b * Tk * vld + kv * L.dv;
    T* ybh = y + b * L.Tq * yld + h * L.dv;
    for_each_row_block(L, [&](std::size_t r0, std::size_t rows, std::size_t klo, std::size_t khi) {
      // y_bh[r0:] = w_bh[r0:, klo:khi] @ v_kv[klo:khi]: (rows, n) @ (n, dv); w is 0 elsewhere
      if (khi == klo) return zero_block(ybh + r0 * yld, rows, L.dv, yld);
      gemm_strided<T>(false, false, rows, L.dv, khi - klo, T(1), wbh + r0 * Tk + klo, Tk,
                      vb + klo * vld, vld, T(0), ybh + r0 * yld, yld);
    });
  });
}

template <class T>
void banded_mix_backward(const HeadLayout& L, const T* w, const T* v, const T* dy, T* dw,
                         T* dv) {
  const std::size_t Tk = L.Tk, vld = L.v_ld(), yld = L.y_ld();
  parallel_for_if_worth(L.B * L.KV, 2 * banded_flops(L, L.dv), [&](std::size_t p) {
    const std::size_t b = p / L.KV, kv = p % L.KV;
    const T* vb = v + b * Tk * vld + kv * L.dv;
    T* dvb = dv ? dv + b * Tk * vld + kv * L.dv : nullptr;
    if (dvb) zero_block(dvb, Tk, L.dv, vld);  // accumulated over the group below
    for (std::size_t g = 0; g < L.group(); ++g) {
      const std::size_t h = kv * L.group() + g;
      const T* wbh = w + (b * L.H + h) * L.Tq * Tk;
      const T* dybh = dy + b * L.Tq * yld + h * L.dv;
      // dw_bh = dy_bh @ v_kv^T: (Tq, dv) @ (dv, Tk), every entry (the weights' true gradient)
      if (dw && Tk > 0)
        gemm_strided<T>(false, true, L.Tq, Tk, L.dv, T(1), dybh, yld, vb, vld, T(0),
                        dw + (b * L.H + h) * L.Tq * Tk, Tk);
      if (!dvb) continue;
      // dv_kv[klo:khi] += w_bh[r0:, klo:khi]^T @ dy_bh[r0:]: (n, rows) @ (rows, dv)
      for_each_row_block(L, [&](std::size_t r0, std::size_t rows, std::size_t klo,
                                std::size_t khi) {
        if (khi > klo)
          gemm_strided<T>(true, false, khi - klo, L.dv, rows, T(1), wbh + r0 * Tk + klo, Tk,
                          dybh + r0 * yld, yld, T(1), dvb + klo * vld, vld);
      });
    }
  });
}

// Whether the (rows, width) block at p (row stride ld) holds only finite numbers: a test
// of the exponent bits, which vectorizes (a floating-point sum would not be reordered).
template <class T>
bool all_finite(const T* p, std::size_t rows, std::size_t width, std::size_t ld) {
  using Bits = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  constexpr Bits exponent = sizeof(T) == 4 ? Bits(0x7f800000u) : Bits(0x7ff0000000000000ull);
  Bits nonfinite = 0;
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < width; ++c) {
      Bits b;
      std::memcpy(&b, p + r * ld + c, sizeof b);
      nonfinite |= Bits((b & exponent) == exponent);
    }
  return nonfinite == 0;
}

}  // namespace

template <class T>
void visible_keys_product(const AttentionRule& rule, std::size_t r0, std::size_t rows,
                          std::size_t j0, std::size_t n, std::size_t dh, T alpha, const T* ds,
                          std::size_t ldds, const T* k, std::size_t ldk, T beta, T* dq,
                          std::size_t lddq, Triangle structure) {
  // finite keys: the zeros of ds contribute exact zeros, so one product over all of them
  if (all_finite(k, n, dh, ldk))
    return gemm_strided<T>(false, false, rows, dh, n, alpha, ds, ldds, k, ldk, beta, dq, lddq,
                           structure);
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t a = std::max(rule.lo(r0 + r), j0), e = std::min(rule.hi(r0 + r), j0 + n);
    T* out = dq + r * lddq;
    if (a >= e) {  // no key of this range: an empty sum
      if (beta == T(0)) std::fill(out, out + dh, T(0));
      continue;
    }
    // dq[r] (1, dh) (+)= alpha * ds[r, a:e] (1, e - a) @ k[a:e] (e - a, dh)
    gemm_strided<T>(false, false, 1, dh, e - a, alpha, ds + r * ldds + (a - j0), ldds,
                    k + (a - j0) * ldk, ldk, beta, out, lddq);
  }
}

template <class T>
void attention_weights_forward(const HeadLayout& L, const T* q, const T* k, T scale, T* w) {
  if (L.square_mha()) return square_weights_forward(L, q, k, scale, w);
  banded_weights_forward(L, q, k, scale, w);
}

template <class T>
void attention_weights_backward(const HeadLayout& L, const T* q, const T* k, const T* w,
                                const T* dw, T scale, T* dq, T* dk) {
  if (L.square_mha()) return square_weights_backward(L, q, k, w, dw, scale, dq, dk);
  banded_weights_backward(L, q, k, w, dw, scale, dq, dk);
}

template <class T>
void attention_mix_forward(const HeadLayout& L, const T* w, const T* v, T* y) {
  if (L.square_mha()) return square_mix_forward(L, w, v, y);
  banded_mix_forward(L, w, v, y);
}

template <class T>
void attention_mix_backward(const HeadLayout& L, const T* w, const T* v, const T* dy, T* dw,
                            T* dv) {
  if (L.square_mha()) return square_mix_backward(L, w, v, dy, dw, dv);
  banded_mix_backward(L, w, v, dy, dw, dv);
}

#define TAPEGRAD_INSTANTIATE(T)                                                              \
  template void visible_keys_product(const AttentionRule&, std::size_t, std::size_t,         \
                                     std::size_t, std::size_t, std::size_t, T, const T*,     \
                                     std::size_t, const T*, std::size_t, T, T*, std::size_t, \
                                     Triangle);                                              \
  template void attention_weights_forward(const HeadLayout&, const T*, const T*, T, T*);     \
  template void attention_weights_backward(const HeadLayout&, const T*, const T*, const T*,  \
                                           const T*, T, T*, T*);                             \
  template void attention_mix_forward(const HeadLayout&, const T*, const T*, T*);            \
  template void attention_mix_backward(const HeadLayout&, const T*, const T*, const T*, T*,  \
                                       T*);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad::kernels
