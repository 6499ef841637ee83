#pragma once
// The llama_step workload's shared half: its shape, the parameter list in tapegrad's
// registration order and layout (Linear weights (in, out)), the weights both programs load
// (drawn here, so both frameworks start from the same numbers), and a naive double-
// precision forward used to check each framework's loss and gradients once at start-up.
// Standard library only, like harness.hpp.
#include <cmath>
#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "harness.hpp"

namespace bench {

// TOY-GPT's size with the llama preset: RoPE (rotate_half pairs, theta 10000), RMSNorm,
// SwiGLU without biases, kv_heads = heads / 2, no biases, untied head, no position table.
// Same batch, tokens and AdamW settings as toygpt_step.
struct LlamaShape : ToyGptShape {
  std::size_t kv_heads = 2, mlp_multiple = 32;
  double rope_theta = 10000.0, norm_eps = 1e-5;
  std::size_t head_dim() const { return d_model / heads; }
  // int(2 * mlp_ratio * d / 3) rounded up to a multiple of 32: 352 at d = 128
  std::size_t hidden() const {
    const std::size_t h = 2 * mlp_ratio * d_model / 3;
    return (h + mlp_multiple - 1) / mlp_multiple * mlp_multiple;
  }
};

struct LlamaParam {
  std::string name;
  std::vector<std::size_t> shape;
  enum class Kind { embedding, matrix, residual, gain } kind;  // how it is initialised
  std::size_t size() const {
    std::size_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
};
using LlamaWeights = std::vector<std::vector<double>>;  // one per LlamaParam, row-major

// Per layer, in this order (the index the naive forward and libtorch's model use).
enum LlamaLayerParam { kNorm1, kWq, kWk, kWv, kWo, kNorm2, kGate, kUp, kDown, kPerLayer };

// tapegrad's named_parameters() of Transformer<T> with this config, in its order.
inline std::vector<LlamaParam> llama_parameters(const LlamaShape& g) {
  using K = LlamaParam::Kind;
  const std::size_t D = g.d_model, Q = g.heads * g.head_dim(), KV = g.kv_heads * g.head_dim(),
                    F = g.hidden();
  std::vector<LlamaParam> p = {{"tok_emb.weight", {g.vocab, D}, K::embedding}};
  for (std::size_t l = 0; l < g.layers; ++l) {
    const std::string b = "blocks." + std::to_string(l) + ".";
    p.push_back({b + "norm1.weight", {D}, K::gain});
    p.push_back({b + "attn.Wq", {D, Q}, K::matrix});
    p.push_back({b + "attn.Wk", {D, KV}, K::matrix});
    p.push_back({b + "attn.Wv", {D, KV}, K::matrix});
    p.push_back({b + "attn.Wo", {Q, D}, K::residual});
    p.push_back({b + "norm2.weight", {D}, K::gain});
    p.push_back({b + "mlp.gate.weight", {D, F}, K::matrix});
    p.push_back({b + "mlp.up.weight", {D, F}, K::matrix});
    p.push_back({b + "mlp.down.weight", {F, D}, K::residual});
  }
  p.push_back({"norm_f.weight", {D}, K::gain});
  p.push_back({"head.weight", {D, g.vocab}, K::matrix});
  return p;
}

// The timed model's weights: GPT-2's init, as tapegrad's own (normal 0.02, the residual
// projections Wo and down 0.02/sqrt(2 layers), gains 1), so the loss starts near ln(vocab)
// as in toygpt_step.
inline LlamaWeights llama_train_weights(const LlamaShape& g, const std::vector<LlamaParam>& ps) {
  Rng r(1);
  LlamaWeights w;
  for (const LlamaParam& p : ps) {
    if (p.kind == LlamaParam::Kind::gain) {
      w.emplace_back(p.size(), 1.0);
      continue;
    }
    const double sd = p.kind == LlamaParam::Kind::residual ? 0.02 / std::sqrt(2.0 * double(g.layers))
                                                           : 0.02;
    w.push_back(r.normals(p.size(), sd));
  }
  return w;
}

// The check's scale for each parameter: unit-scale activations everywhere (embeddings 1,
// matrices 1/sqrt(fan_in), gains around 1), so that scores, RoPE angles, the GQA head
// mapping and every gain move the loss; at GPT-2's 0.02 the attention is almost uniform
// and a wrong RoPE would hardly show.
inline double llama_check_scale(const LlamaParam& p) {
  if (p.kind == LlamaParam::Kind::embedding) return 1.0;
  if (p.kind == LlamaParam::Kind::gain) return 0.1;
  return 1.0 / std::sqrt(double(p.shape[0]));
}
inline LlamaWeights llama_check_weights(const std::vector<LlamaParam>& ps) {
  Rng r(23);
  LlamaWeights w;
  for (const LlamaParam& p : ps) {
    w.push_back(r.normals(p.size(), llama_check_scale(p)));
    if (p.kind == LlamaParam::Kind::gain)
      for (double& v : w.back()) v += 1.0;
  }
  return w;
}

// ---------------------------------------------------------------- naive forward

namespace naive {
// y (n, cols) = x (n, rows) @ W (rows, cols)
inline std::vector<double> matmul(const std::vector<double>& x, const std::vector<double>& W,
                                  std::size_t n, std::size_t rows, std::size_t cols) {
  std::vector<double> y(n * cols, 0.0);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t k = 0; k < rows; ++k)
      for (std::size_t j = 0; j < cols; ++j) y[i * cols + j] += x[i * rows + k] * W[k * cols + j];
  return y;
}
// x / sqrt(mean(x^2) + eps) * gain, row by row
inline std::vector<double> rms_norm(const std::vector<double>& x, const std::vector<double>& gain,
                                    std::size_t D, double eps) {
  std::vector<double> y(x.size());
  for (std::size_t r = 0; r < x.size() / D; ++r) {
    double ss = 0;
    for (std::size_t j = 0; j < D; ++j) ss += x[r * D + j] * x[r * D + j];
    const double s = 1.0 / std::sqrt(ss / double(D) + eps);
    for (std::size_t j = 0; j < D; ++j) y[r * D + j] = x[r * D + j] * s * gain[j];
  }
  return y;
}
// rotate_half RoPE in place on x (T, heads*dh): pairs (i, i + dh/2) of each head rotated by
// t * theta^(-2i/dh) at position t.
inline void rope(std::vector<double>& x, std::size_t T, std::size_t heads, std::size_t dh,
                 double theta) {
  const std::size_t half = dh / 2;
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t h = 0; h < heads; ++h)
      for (std::size_t i = 0; i < half; ++i) {
        const double a = double(t) * std::pow(theta, -2.0 * double(i) / double(dh));
        double* p = &x[(t * heads + h) * dh];
        const double x1 = p[i], x2 = p[i + half];
        p[i] = x1 * std::cos(a) - x2 * std::sin(a);
        p[i + half] = x2 * std::cos(a) + x1 * std::sin(a);
      }
}
// causal grouped-query attention of one sequence: q (T, H*dh), k, v (T, KV*dh) -> (T, H*dh)
inline std::vector<double> attention(const std::vector<double>& q, const std::vector<double>& k,
                                     const std::vector<double>& v, std::size_t T, std::size_t H,
                                     std::size_t KV, std::size_t dh) {
  std::vector<double> o(T * H * dh, 0.0), w(T);
  for (std::size_t h = 0; h < H; ++h) {
    const std::size_t kh = h / (H / KV);
    for (std::size_t i = 0; i < T; ++i) {
      double m = -INFINITY, z = 0;
      for (std::size_t j = 0; j <= i; ++j) {
        double s = 0;
        for (std::size_t d = 0; d < dh; ++d) s += q[(i * H + h) * dh + d] * k[(j * KV + kh) * dh + d];
        m = std::max(m, w[j] = s / std::sqrt(double(dh)));
      }
      for (std::size_t j = 0; j <= i; ++j) z += (w[j] = std::exp(w[j] - m));
      for (std::size_t j = 0; j <= i; ++j)
        for (std::size_t d = 0; d < dh; ++d)
          o[(i * H + h) * dh + d] += w[j] / z * v[(j * KV + kh) * dh + d];
    }
  }
  return o;
}
}  // namespace naive

// The residual stream (T, D) after every block, for tokens[0..T), by plain loops in double:
// embedding, then per layer RMSNorm -> GQA with RoPE, causal -> residual -> RMSNorm ->
// SwiGLU -> residual (before the final norm and head).
inline std::vector<double> naive_llama_hidden(const LlamaShape& g, const LlamaWeights& w,
                                              const std::int64_t* tokens, std::size_t T) {
  const std::size_t D = g.d_model, H = g.heads, KV = g.kv_heads, dh = g.head_dim(), F = g.hidden();
  std::vector<double> x(T * D);
  for (std::size_t t = 0; t < T; ++t)
    for (std::size_t j = 0; j < D; ++j) x[t * D + j] = w[0][std::size_t(tokens[t]) * D + j];
  for (std::size_t l = 0; l < g.layers; ++l) {
    auto P = [&](int k) -> const std::vector<double>& { return w[1 + l * kPerLayer + k]; };
    const std::vector<double> h = naive::rms_norm(x, P(kNorm1), D, g.norm_eps);
    std::vector<double> q = naive::matmul(h, P(kWq), T, D, H * dh);
    std::vector<double> k = naive::matmul(h, P(kWk), T, D, KV * dh);
    const std::vector<double> v = naive::matmul(h, P(kWv), T, D, KV * dh);
    naive::rope(q, T, H, dh, g.rope_theta);
    naive::rope(k, T, KV, dh, g.rope_theta);
    const std::vector<double> o = naive::matmul(naive::attention(q, k, v, T, H, KV, dh), P(kWo), T, H * dh, D);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    const std::vector<double> h2 = naive::rms_norm(x, P(kNorm2), D, g.norm_eps);
    const std::vector<double> gate = naive::matmul(h2, P(kGate), T, D, F);
    std::vector<double> m = naive::matmul(h2, P(kUp), T, D, F);
    for (std::size_t i = 0; i < m.size(); ++i) m[i] *= gate[i] / (1.0 + std::exp(-gate[i]));
    const std::vector<double> y = naive::matmul(m, P(kDown), T, F, D);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += y[i];
  }
  return x;
}

// The mean next-token cross-entropy over the first nseq sequences of `seq` (toygpt_tokens'
// layout, (B, T+1)), by plain loops in double.
inline double naive_llama_loss(const LlamaShape& g, const LlamaWeights& w,
                               const std::vector<std::int64_t>& seq, std::size_t nseq) {
  const std::size_t T = g.context, D = g.d_model, V = g.vocab;
  double total = 0;
  for (std::size_t b = 0; b < nseq; ++b) {
    const std::int64_t* s = &seq[b * (T + 1)];
    const std::vector<double> x = naive_llama_hidden(g, w, s, T);
    const std::size_t last = 1 + g.layers * kPerLayer;
    const std::vector<double> logits =
        naive::matmul(naive::rms_norm(x, w[last], D, g.norm_eps), w[last + 1], T, D, V);
    for (std::size_t t = 0; t < T; ++t) {
      const double* z = &logits[t * V];
      double m = -INFINITY, sum = 0;
      for (std::size_t c = 0; c < V; ++c) m = std::max(m, z[c]);
      for (std::size_t c = 0; c < V; ++c) sum += std::exp(z[c] - m);
      total += m + std::log(sum) - z[std::size_t(s[t + 1])];
    }
  }
  return total / double(nseq * T);
}

// A framework's loss and gradients (one per parameter, as LlamaWeights) of the first nseq
// sequences of `seq` at weights w.
using LlamaLossFn = std::function<std::pair<double, LlamaWeights>(
    const LlamaWeights& w, const std::vector<std::int64_t>& seq, std::size_t nseq)>;

// The start-up check: at the check weights, on two sequences, the framework's float loss
// against the naive loss in double (relative 1e-4), and its gradients through
// d loss/d U = sum_i <grad_i, U_i> along one random direction U through every parameter
// against a central difference of the naive loss (relative 1e-3): a wrong RoPE pairing, K/V
// head mapping, norm or SwiGLU moves the loss, a wrong backward moves the sum.
inline void check_llama(const LlamaShape& g, const LlamaLossFn& framework, Result& r) {
  const std::vector<LlamaParam> ps = llama_parameters(g);
  const LlamaWeights w = llama_check_weights(ps);
  const std::vector<std::int64_t> seq = toygpt_tokens(g);
  const std::size_t nseq = 2;
  const auto [loss, grads] = framework(w, seq, nseq);
  const double want = naive_llama_loss(g, w, seq, nseq);
  const double loss_err = std::abs(loss - want) / std::abs(want);
  r.add("check_loss_rel_err", loss_err);
  require(loss_err < 1e-4, "llama loss " + std::to_string(loss) + " differs from the naive " +
                               std::to_string(want));
  require(grads.size() == ps.size(), "llama: one gradient per parameter expected");
  Rng rng(29);
  LlamaWeights dir, plus = w, minus = w;
  double analytic = 0;
  const double eps = 1e-4;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    require(grads[i].size() == ps[i].size(), "llama: gradient of " + ps[i].name + " has the wrong size");
    dir.push_back(rng.normals(ps[i].size(), llama_check_scale(ps[i])));
    for (std::size_t k = 0; k < dir[i].size(); ++k) {
      analytic += grads[i][k] * dir[i][k];
      plus[i][k] += eps * dir[i][k];
      minus[i][k] -= eps * dir[i][k];
    }
  }
  const double numeric =
      (naive_llama_loss(g, plus, seq, nseq) - naive_llama_loss(g, minus, seq, nseq)) / (2 * eps);
  const double grad_err = std::abs(numeric - analytic) / std::max(std::abs(numeric), 1e-12);
  r.add("check_grad_rel_err", grad_err);
  require(grad_err < 1e-3, "llama gradients disagree with a central difference of the naive loss: "
                           "analytic " + std::to_string(analytic) + ", numeric " + std::to_string(numeric));
}

// Forward matmul FLOPs of one step times 3 (forward + backward), counted as toygpt_flops:
// the projections (q, k, v, o; gate, up, down), the head, and the full T x T scores and
// weights @ V.
inline double llama_flops(const LlamaShape& g) {
  const double tokens = double(g.batch * g.context), D = double(g.d_model);
  const double Q = double(g.heads * g.head_dim()), KV = double(g.kv_heads * g.head_dim());
  const double per_layer = D * (2 * Q + 2 * KV) + 3 * D * double(g.hidden()) +
                           2.0 * double(g.context) * Q;
  return 3.0 * tokens * 2.0 * (double(g.layers) * per_layer + D * double(g.vocab));
}

// ---------------------------------------------------------------- cached decode

// The decode_ctx{256,1024} workloads: a small decode model (the llama preset, d_model 256,
// 4 layers, 8 heads, 2 KV heads, vocab 256, float32, batch 1) with its context set to the
// workload's. The cache is preallocated for the context and prefilled with context - 1
// tokens outside the timed region; each timed step is one token (embedding, 4 blocks
// reading the cache, head, argmax) at position context - 1 under no-grad, after which the
// cache is rolled back to context - 1 positions, so every step attends over `context` keys.
constexpr std::size_t kDecodeContexts[] = {256, 1024};
inline LlamaShape decode_shape(std::size_t context) {
  LlamaShape g;
  g.vocab = 256;
  g.d_model = 256;
  g.layers = 4;
  g.heads = 8;
  g.kv_heads = 2;
  g.context = context;
  g.batch = 1;
  return g;
}
// "decode_ctx256" -> 256; 0 when the name is not a decode workload
inline std::size_t parse_decode(const std::string& w) {
  for (std::size_t c : kDecodeContexts)
    if (w == "decode_ctx" + std::to_string(c)) return c;
  return 0;
}
// The prompt (context - 1 tokens) and the first decoded token, both programs alike.
inline std::vector<std::int64_t> decode_tokens(const LlamaShape& g) {
  Rng r(31);
  std::vector<std::int64_t> t(g.context);
  for (auto& v : t) v = std::int64_t(r.below(g.vocab));
  return t;
}

// The logits (vocab) at the last position of one sequence, by plain loops in double: what
// one cached decode step after a prefill of the first tokens.size() - 1 must produce.
inline std::vector<double> naive_llama_last_logits(const LlamaShape& g, const LlamaWeights& w,
                                                   const std::vector<std::int64_t>& tokens) {
  const std::size_t T = tokens.size(), D = g.d_model, V = g.vocab;
  const std::vector<double> x = naive_llama_hidden(g, w, tokens.data(), T);
  const std::size_t last = 1 + g.layers * kPerLayer;
  const std::vector<double> xl(x.end() - std::ptrdiff_t(D), x.end());
  return naive::matmul(naive::rms_norm(xl, w[last], D, g.norm_eps), w[last + 1], 1, D, V);
}

// A framework's decode at weights w: prefill tokens[0 .. n-2] into a fresh cache, one
// cached step on tokens[n-1] -> its logits (vocab).
using DecodeLogitsFn = std::function<std::vector<double>(const LlamaWeights& w,
                                                         const std::vector<std::int64_t>& tokens)>;

// The start-up check: at the check weights (unit-scale activations, so RoPE at the absolute
// position, the K/V head mapping and the cache contents all move the logits), the
// framework's decoded logits against the naive double forward over the whole sequence,
// relative to the largest logit, within 1e-4.
inline void check_decode(const LlamaShape& g, const DecodeLogitsFn& framework, Result& r) {
  const LlamaWeights w = llama_check_weights(llama_parameters(g));
  const std::vector<std::int64_t> tokens = decode_tokens(g);
  const std::vector<double> got = framework(w, tokens);
  require(got.size() == g.vocab, "decode: the step's logits have the wrong size");
  const std::vector<double> want = naive_llama_last_logits(g, w, tokens);
  const double err = max_rel_error(got, want);
  r.add("check_logits_rel_err", err);
  require(err < 1e-4, "decoded logits differ from the naive forward by " + std::to_string(err));
}

// Matmul FLOPs of one decode step (2 per multiply-add): the projections and the head for
// one token, and the scores and weights @ V against `context` keys.
inline double decode_flops(const LlamaShape& g) {
  const double D = double(g.d_model), Q = double(g.heads * g.head_dim()),
               KV = double(g.kv_heads * g.head_dim());
  const double per_layer = D * (2 * Q + 2 * KV) + 3 * D * double(g.hidden()) + 2.0 * double(g.context) * Q;
  return 2.0 * (double(g.layers) * per_layer + D * double(g.vocab));
}

}  // namespace bench
