#pragma once
// Scaled dot-product attention with the semantics of
// torch.nn.functional.scaled_dot_product_attention (boolean mask, true = attend; default
// scale 1/sqrt(d_k); but a fully masked row gives zero weights, not nan), the causal and
// sliding-window masks, and multi-head attention on top of it, differentiable end to end.
#include <functional>
#include <optional>
#include <utility>

#include "autograd/tensor.hpp"
#include "ops/attention_spec.hpp"
#include "ops/softmax.hpp"  // Mask

namespace tapegrad {

// (T, T) boolean, true at [i, j] exactly when j <= i: query i sees keys 0..i.
// The same as causal_mask(T, T).
Mask causal_mask(std::size_t T);
// (Tq, Tk), bottom-right aligned: the queries are the last Tq of Tk positions, so
// [r, j] is true iff j <= Tk - Tq + r. Tq > Tk is a ShapeError (some query would precede
// every key).
Mask causal_mask(std::size_t Tq, std::size_t Tk);
// (Tq, Tk), bottom-right aligned like causal_mask: [r, j] is true iff
// 0 <= (Tk - Tq + r) - j < window, the query and the window - 1 keys before it.
// window 0 or Tq > Tk is a ShapeError.
Mask sliding_window_mask(std::size_t Tq, std::size_t Tk, std::size_t window);

template <class T>
struct AttentionResult {
  Tensor<T> out;      // (..., Tq, d_v)
  Tensor<T> weights;  // (..., Tq, Tk), rows sum to 1 (0 for a fully masked row)
};

// Q (..., Tq, d_k), K (..., Tk, d_k), V (..., Tk, d_v), leading axes broadcast together.
// scores = Q @ swapaxes(K, -1, -2) * scale, scale defaulting to 1/sqrt(d_k); masked scores
// (mask false) become -inf before the softmax; weights = softmax(scores, -1);
// out = weights @ V. Both results are on the tape. The scale is a plain double (used in
// T's precision) so that a call like (Q, K, V, std::nullopt, 1.0) works for float and double.
template <class T>
AttentionResult<T> scaled_dot_product_attention(const Tensor<T>& Q, const Tensor<T>& K,
                                                const Tensor<T>& V,
                                                const std::optional<Mask>& mask = std::nullopt,
                                                std::optional<double> scale = std::nullopt);

// Which implementation of the one AttentionSpec computes it. All give the same results
// to round-off, forward and backward (tests/test_attention_gqa.cpp, tests/test_attention_flash.cpp).
enum class AttentionPath {
  composed,  // the reference: reshape, transpose, repeat_interleave, scaled_dot_product_attention
  fused,     // ops/attention_fused.hpp: heads and shared kv heads read in place, masked band skipped
  flash      // ops/attention_flash.hpp: tiled online softmax, memory linear in T; the result's
             // weights are left undefined (a default Tensor): flash never forms them
};

// From this many keys on, attention whose weights nobody asked for takes the flash path.
// fwd+bwd of one causal attention, 8 heads of 32, float (tools/flash_bench, best of 8, at 1
// and 2 threads): at 512 keys the two paths are within 5 % (and the 4-sequence MHA step at
// 512 runs 14-20 % slower on flash); at 1024 flash is 3-14 % faster, at 1536 12-25 %, and
// its memory is linear in T (17 MiB against fused's 86 MiB at 1024).
inline constexpr std::size_t kFlashFromKeys = 1024;

// The path attention takes when none is forced: the fused kernels when the caller wants the
// weights (only they return them) or below kFlashFromKeys keys, flash from there on.
inline AttentionPath default_attention_path(std::size_t keys, bool want_weights) {
  return want_weights || keys < kFlashFromKeys ? AttentionPath::fused : AttentionPath::flash;
}

// q (B, Tq, heads*head_dim), k (B, Tk, kv_heads*head_dim), v (B, Tk, kv_heads*v_head_dim)
// -> out (B, Tq, heads*v_head_dim) with the heads already merged, weights
// (B, heads, Tq, Tk). Query head h reads kv head h / (heads / kv_heads) (PyTorch's
// repeat_interleave order, NOT tiling). Arguments are checked by check_attention_spec,
// whose messages name "attention" and the three shapes.
template <class T>
AttentionResult<T> attention(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                             const AttentionSpec& spec, AttentionPath path = AttentionPath::fused);

// Hooks on attention's two intermediates, each optional: `scores` receives the scores the
// softmax will read (B, heads, Tq, Tk), scaled, soft-capped and biased as the spec says and
// -inf where its mask hides a key, and returns what the softmax reads instead (under the
// same mask: a hook cannot unhide a key); `pattern` receives the weights and returns what
// mixes the values. Both stay on the tape.
template <class T>
struct AttentionStages {
  std::function<Tensor<T>(const Tensor<T>&)> scores, pattern;
};

// attention() on the composed path (the only one that forms both intermediates), with
// `stages` applied on the way.
template <class T>
AttentionResult<T> attention_staged(const Tensor<T>& q, const Tensor<T>& k, const Tensor<T>& v,
                                    const AttentionSpec& spec, const AttentionStages<T>& stages);

// The scores attention()'s softmax sees, (B, heads, Tq, Tk): scale * q.k, soft-capped and
// biased as the spec says, -inf where its mask hides a key. A constant, outside the graph: for inspecting attention.
template <class T>
Tensor<T> attention_scores(const Tensor<T>& q, const Tensor<T>& k, const AttentionSpec& spec);

struct MultiHeadOptions {
  bool causal = false;
  std::optional<double> scale;  // default 1/sqrt(D / heads); 1.0 = unscaled
  // true: the fused kernels of ops/attention_fused.hpp (no head split/merge copies);
  // false: the plain composition reshape/transpose/matmul/masked_softmax they are tested
  // against.
  bool fused = true;
};

// Self-attention: x (B, T, D) projected to q = x @ Wq, k = x @ Wk, v = x @ Wv, attended as
// `spec` says (every option of attention()), the merged heads projected through Wo:
// Wq (D, heads*head_dim), Wk (D, kv_heads*head_dim), Wv (D, kv_heads*v_head_dim),
// Wo (heads*v_head_dim, D) -> (B, T, D). The weights are not returned, so from
// kFlashFromKeys positions on they are never formed (the flash path; the same result to
// round-off).
template <class T>
Tensor<T> multi_head_attention(const Tensor<T>& x, const Tensor<T>& Wq, const Tensor<T>& Wk,
                               const Tensor<T>& Wv, const Tensor<T>& Wo, const AttentionSpec& spec);
// The same on `heads` heads of D / heads, causal or not, with (D, D) weights.
template <class T>
Tensor<T> multi_head_attention(const Tensor<T>& x, const Tensor<T>& Wq, const Tensor<T>& Wk,
                               const Tensor<T>& Wv, const Tensor<T>& Wo, std::size_t heads,
                               bool causal = false);

// The same, also returning the per-head weights (B, heads, T, T); `fused` false takes the
// composed path.
template <class T>
AttentionResult<T> multi_head_attention_with_weights(const Tensor<T>& x, const Tensor<T>& Wq,
                                                     const Tensor<T>& Wk, const Tensor<T>& Wv,
                                                     const Tensor<T>& Wo, const AttentionSpec& spec,
                                                     bool fused = true);
// With MultiHeadOptions: the spec of `heads` heads, options.causal and options.scale.
template <class T>
AttentionResult<T> multi_head_attention_with_weights(const Tensor<T>& x, const Tensor<T>& Wq,
                                                     const Tensor<T>& Wk, const Tensor<T>& Wv,
                                                     const Tensor<T>& Wo, std::size_t heads,
                                                     const MultiHeadOptions& options = {});

}  // namespace tapegrad
