#pragma once
// The one rule every attention path follows for a (query, key, head) triple: whether the key
// is visible to the query, and what is done to its score before the softmax. The composed
// path builds its mask and bias from it, the fused, flash and decode kernels apply it to
// their score blocks; nothing else decides either.
//
// Positions are absolute: query row r sits at position q_offset + r (the queries are the
// last Tq of the Tk keys), key j at position j, so a KV cache and a chunked prefill see the
// same rule as a full forward.
//
// A score s = scale * q.k becomes c * tanh(s / c) when softcap c > 0 (Gemma 2's logit
// soft-cap), then gains the positional bias -slope(h) * (i - j) under ALiBi; masked keys
// drop out afterwards, whatever their score.
#include <cmath>
#include <cstddef>

#include "ops/kernels/rowwise.hpp"  // softcap_*, subtract_linear_bias

namespace tapegrad::kernels {

struct AttentionRule {
  std::size_t Tk = 0, q_offset = 0, window = 0;
  bool causal = false;
  double softcap = 0;  // 0: off
  bool alibi = false;
  std::size_t H = 0;  // the query heads, for the ALiBi slopes

  // The visible keys of query row r: [lo(r), hi(r)). Both grow with r, so the keys of a
  // block of rows [r0, r1) are [lo(r0), hi(r1 - 1)).
  std::size_t hi(std::size_t r) const { return causal ? q_offset + r + 1 : Tk; }
  std::size_t lo(std::size_t r) const { return window && hi(r) > window ? hi(r) - window : 0; }
  bool visible(std::size_t r, std::size_t j) const { return lo(r) <= j && j < hi(r); }

  // Whether scores change at all, and whether a bias is added to them: the kernels test
  // this once, outside their loops; the composed path builds its bias tensor from bias().
  bool modifies_scores() const { return softcap > 0 || adds_bias(); }
  bool adds_bias() const { return alibi; }

  // ALiBi's slope of query head h, as Hugging Face's build_alibi_tensor: with n the largest
  // power of two <= H, 2^(-8 (h + 1) / n) for h < n, and the remaining heads
  // 2^(-4 (2 (h - n) + 1) / n), interleaving the next power's slopes.
  double slope(std::size_t h) const {
    std::size_t n = 1;
    while (n * 2 <= H) n *= 2;
    return h < n ? std::exp2(-8.0 * double(h + 1) / double(n))
                 : std::exp2(-4.0 * double(2 * (h - n) + 1) / double(n));
  }
  // What is added to the (capped) score of key j for query row r of head h.
  double bias(std::size_t h, std::size_t r, std::size_t j) const {
    return alibi ? -slope(h) * (double(q_offset + r) - double(j)) : 0.0;
  }

  // The slope modify_scores adds with for head h: slope(h) under ALiBi, 0 otherwise. A
  // kernel takes it once per head and block of rows (it costs an exp2), not once per row.
  template <class T>
  T head_slope(std::size_t h) const {
    return alibi ? T(slope(h)) : T(0);
  }

  // s[j - j0] for the keys j in [a, e) of query row r of the head whose head_slope is m:
  // the scaled scores become the scores the softmax sees. Only called when
  // modifies_scores().
  template <class T>
  void modify_scores(T* s, std::size_t j0, std::size_t a, std::size_t e, std::size_t r,
                     T m) const {
    cap_scores(s, j0, a, e);
    add_bias(s, j0, a, e, r, m);
  }
  // Its two steps, for a backward that keeps the capped scores: the soft-cap (with `kept`,
  // the capped scores are stored there too, at the same offsets as in s) ...
  template <class T>
  void cap_scores(T* s, std::size_t j0, std::size_t a, std::size_t e, T* kept = nullptr) const {
    if (softcap > 0 && a < e)
      softcap_inplace(s + (a - j0), e - a, T(softcap), kept ? kept + (a - j0) : nullptr);
  }
  // ... and the bias; the first key a is i - a positions before the query i = q_offset + r
  // (a <= i: ALiBi is causal).
  template <class T>
  void add_bias(T* s, std::size_t j0, std::size_t a, std::size_t e, std::size_t r, T m) const {
    if (alibi && a < e)
      subtract_linear_bias(s + (a - j0), e - a, m, T(double(q_offset + r) - double(a)));
  }

  // d(score the softmax sees) / d(scaled score) = 1 - tanh^2(s / c) = 1 - (capped / c)^2
  // under the soft-cap, 1 otherwise; `capped` holds c * tanh(s / c) of keys [a, e) (the
  // scores after cap_scores, before the bias), ds is multiplied in place.
  template <class T>
  void scale_grad_by_softcap(const T* capped, T* ds, std::size_t j0, std::size_t a,
                             std::size_t e) const {
    if (!(softcap > 0) || e <= a) return;
    softcap_backward_inplace(capped + (a - j0), ds + (a - j0), e - a, T(softcap));
  }
  // The same from the scaled scores before the cap (a backward that recomputes them).
  template <class T>
  void scale_grad_by_softcap_from_scores(const T* scores, T* ds, std::size_t j0, std::size_t a,
                                         std::size_t e) const {
    if (!(softcap > 0) || e <= a) return;
    softcap_backward_from_scores(scores + (a - j0), ds + (a - j0), e - a, T(softcap));
  }
};

}  // namespace tapegrad::kernels
