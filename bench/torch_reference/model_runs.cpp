// The model workloads in libtorch: a TOY-GPT training step, Llama's, and a cached decode
// step, each model written as a PyTorch user writes it.
#include "shared.hpp"

#include <cmath>
#include <limits>

namespace torch_reference {

// Transformer written out as a PyTorch user would, with the same structure as tapegrad's
// nn::Transformer: token + learned positional embedding, `layers` pre-norm blocks
// x + mha(ln1(x)), x + proj(gelu_tanh(fc(ln2(x)))), final LayerNorm, untied bias-free
// head. Linear layers are F.linear with nn.Linear's (out, in) weights; attention is the
// textbook mha() above with (D, D) weights and no biases, as tapegrad's. GPT-2 init:
// normal(0, 0.02), residual projections (Wo, proj) 0.02 / sqrt(2 * layers).
struct ToyGpt {
  struct Layer {
    torch::Tensor ln1_w, ln1_b, Wq, Wk, Wv, Wo, ln2_w, ln2_b, fc_w, fc_b, proj_w, proj_b;
  };
  bench::ToyGptShape g;
  torch::Tensor tok, pos, lnf_w, lnf_b, head_w, blocked;
  std::vector<Layer> layers;

  explicit ToyGpt(const bench::ToyGptShape& shape) : g(shape) {
    torch::manual_seed(1);
    const int64_t V = int64_t(g.vocab), C = int64_t(g.context), D = int64_t(g.d_model),
                  Hd = int64_t(g.mlp_ratio * g.d_model);
    const double std = 0.02, res = 0.02 / std::sqrt(2.0 * double(g.layers));
    auto normal = [](std::vector<int64_t> shape, double sd) {
      return (torch::randn(shape) * sd).set_requires_grad(true);
    };
    auto ones = [](int64_t n) { return torch::ones({n}).set_requires_grad(true); };
    auto zeros = [](int64_t n) { return torch::zeros({n}).set_requires_grad(true); };
    tok = normal({V, D}, std);
    pos = normal({C, D}, std);
    for (std::size_t l = 0; l < g.layers; ++l)
      layers.push_back({ones(D), zeros(D), normal({D, D}, std), normal({D, D}, std),
                        normal({D, D}, std), normal({D, D}, res), ones(D), zeros(D),
                        normal({Hd, D}, std), zeros(Hd), normal({D, Hd}, res), zeros(D)});
    lnf_w = ones(D);
    lnf_b = zeros(D);
    head_w = normal({V, D}, std);
    blocked = blocked_mask(C);
  }
  std::vector<torch::Tensor> parameters() const {
    std::vector<torch::Tensor> p = {tok, pos};
    for (const Layer& L : layers)
      for (const torch::Tensor& t : {L.ln1_w, L.ln1_b, L.Wq, L.Wk, L.Wv, L.Wo, L.ln2_w, L.ln2_b,
                                     L.fc_w, L.fc_b, L.proj_w, L.proj_b})
        p.push_back(t);
    for (const torch::Tensor& t : {lnf_w, lnf_b, head_w}) p.push_back(t);
    return p;
  }
  // tokens (B, T) int64 -> mean next-token cross-entropy against targets (B, T)
  torch::Tensor loss(const torch::Tensor& tokens, const torch::Tensor& targets) const {
    const int64_t D = int64_t(g.d_model), T = tokens.size(1);
    torch::Tensor x = torch::embedding(tok, tokens) + pos.slice(0, 0, T);
    for (const Layer& L : layers) {
      x = x + mha(torch::layer_norm(x, {D}, L.ln1_w, L.ln1_b, 1e-5), L.Wq, L.Wk, L.Wv, L.Wo,
                  int64_t(g.heads), blocked);
      const torch::Tensor h = torch::layer_norm(x, {D}, L.ln2_w, L.ln2_b, 1e-5);
      x = x + torch::linear(torch::gelu(torch::linear(h, L.fc_w, L.fc_b), "tanh"), L.proj_w,
                            L.proj_b);
    }
    const torch::Tensor logits =
        torch::linear(torch::layer_norm(x, {D}, lnf_w, lnf_b, 1e-5), head_w);
    return torch::nn::functional::cross_entropy(logits.reshape({-1, int64_t(g.vocab)}),
                                                targets.reshape({-1}));
  }
};

Result run_toygpt(const Args& a) {
  const bench::ToyGptShape g;
  ToyGpt model(g);
  torch::optim::AdamW opt(model.parameters(), torch::optim::AdamWOptions(g.lr)
                                                  .betas({g.beta1, g.beta2})
                                                  .eps(g.eps)
                                                  .weight_decay(g.weight_decay));
  const std::vector<std::int64_t> seq = bench::toygpt_tokens(g);
  const torch::Tensor all =
      torch::tensor(seq, torch::kInt64).reshape({int64_t(g.batch), int64_t(g.context + 1)});
  const torch::Tensor tokens = all.slice(1, 0, int64_t(g.context)).contiguous();
  const torch::Tensor targets = all.slice(1, 1, int64_t(g.context) + 1).contiguous();
  std::vector<double> losses;
  Result r;
  r.time_steps(a.warmup, a.repeats, [&] {
    opt.zero_grad();
    torch::Tensor loss = model.loss(tokens, targets);
    loss.backward();
    opt.step();
    losses.push_back(loss.item<double>());
  });
  bench::check_toygpt_losses(g, losses, r);
  double count = 0;
  for (const auto& p : model.parameters()) count += double(p.numel());
  r.add("parameters", count);
  r.add("gflops", bench::toygpt_flops(g) / (bench::median(r.samples_ms) * 1e6));
  return r;
}

// ------------------------------------------------------------ llama training step

// The llama preset written out in libtorch 1.13, which has no RMSNorm, no
// scaled_dot_product_attention and no enable_gqa: RMSNorm, rotate_half RoPE, repeat_interleave
// of K/V, the causal softmax and SwiGLU by hand, as Hugging Face's LlamaModel spells them.
// The parameters are bench::llama_parameters' (tapegrad's names, order and (in, out)
// layout, so x @ W is torch::matmul), loaded from the harness's weights.
struct Llama {
  bench::LlamaShape g;
  std::vector<torch::Tensor> p;     // one per bench::LlamaParam
  torch::Tensor cos, sin, blocked;  // (context, head_dim) RoPE tables and the causal mask,
                                    // built once as HF's modules keep them in buffers

  Llama(const bench::LlamaShape& shape, const bench::LlamaWeights& w) : g(shape) {
    const std::vector<bench::LlamaParam> ps = bench::llama_parameters(g);
    for (std::size_t i = 0; i < ps.size(); ++i)
      p.push_back(tensor_of<float>(w[i], std::vector<int64_t>(ps[i].shape.begin(), ps[i].shape.end()), true));
    // angle[t, i] = t * theta^(-2i/dh) for the dh/2 pairs, repeated for both halves
    const int64_t dh = int64_t(g.head_dim());
    const torch::Tensor inv_freq =
        torch::pow(g.rope_theta, -torch::arange(0, dh, 2, torch::kFloat64) / double(dh));
    const torch::Tensor freqs = torch::outer(torch::arange(int64_t(g.context), torch::kFloat64), inv_freq);
    const torch::Tensor angle = torch::cat({freqs, freqs}, -1);
    cos = angle.cos().to(torch::kFloat32);
    sin = angle.sin().to(torch::kFloat32);
    blocked = blocked_mask(int64_t(g.context));
  }
  const torch::Tensor& P(std::size_t layer, int k) const { return p[1 + layer * bench::kPerLayer + k]; }

  torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& gain) const {
    return x * torch::rsqrt(x.pow(2).mean(-1, true) + g.norm_eps) * gain;
  }
  // x (B, heads, T, dh): x * cos + rotate_half(x) * sin, rotate_half(x) = cat(-x2, x1)
  torch::Tensor rope(const torch::Tensor& x) const {
    const int64_t T = x.size(2), half = x.size(3) / 2;
    const torch::Tensor rotated = torch::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1);
    return x * cos.slice(0, 0, T) + rotated * sin.slice(0, 0, T);
  }
  torch::Tensor attention(const torch::Tensor& x, std::size_t l) const {
    const int64_t B = x.size(0), T = x.size(1), dh = int64_t(g.head_dim());
    auto split = [&](const torch::Tensor& y) { return y.reshape({B, T, -1, dh}).transpose(1, 2); };
    const torch::Tensor q = rope(split(torch::matmul(x, P(l, bench::kWq))));
    const torch::Tensor k = rope(split(torch::matmul(x, P(l, bench::kWk))));
    const torch::Tensor v = split(torch::matmul(x, P(l, bench::kWv)));
    const torch::Tensor mask = blocked.slice(0, 0, T).slice(1, 0, T);
    return torch::matmul(gqa_heads(q, k, v, mask), P(l, bench::kWo));
  }
  // down(silu(gate(x)) * up(x))
  torch::Tensor swiglu(const torch::Tensor& x, std::size_t l) const {
    return torch::matmul(torch::silu(torch::matmul(x, P(l, bench::kGate))) * torch::matmul(x, P(l, bench::kUp)),
                         P(l, bench::kDown));
  }
  // tokens (B, T) int64 -> mean next-token cross-entropy against targets (B, T)
  torch::Tensor loss(const torch::Tensor& tokens, const torch::Tensor& targets) const {
    torch::Tensor x = torch::embedding(p[0], tokens);
    for (std::size_t l = 0; l < g.layers; ++l) {
      x = x + attention(rms_norm(x, P(l, bench::kNorm1)), l);
      x = x + swiglu(rms_norm(x, P(l, bench::kNorm2)), l);
    }
    const std::size_t last = 1 + g.layers * bench::kPerLayer;
    const torch::Tensor logits = torch::matmul(rms_norm(x, p[last]), p[last + 1]);
    return torch::nn::functional::cross_entropy(logits.reshape({-1, int64_t(g.vocab)}),
                                                targets.reshape({-1}));
  }
};

// The first nseq sequences of seq (B, T+1) as tokens [:, :T] and next-token targets [:, 1:].
std::pair<torch::Tensor, torch::Tensor> next_token_batch(const std::vector<std::int64_t>& seq,
                                                         std::size_t nseq, std::size_t T) {
  const torch::Tensor all = torch::tensor(seq, torch::kInt64).reshape({-1, int64_t(T + 1)}).slice(0, 0, int64_t(nseq));
  return {all.slice(1, 0, int64_t(T)).contiguous(), all.slice(1, 1, int64_t(T) + 1).contiguous()};
}

std::pair<double, bench::LlamaWeights> llama_loss_and_grads(const bench::LlamaShape& g,
                                                            const bench::LlamaWeights& w,
                                                            const std::vector<std::int64_t>& seq,
                                                            std::size_t nseq) {
  const Llama m(g, w);
  const auto [tokens, targets] = next_token_batch(seq, nseq, g.context);
  torch::Tensor loss = m.loss(tokens, targets);
  loss.backward();
  bench::LlamaWeights grads;
  for (const torch::Tensor& t : m.p) {
    const std::vector<float> v = values<float>(t.grad());
    grads.emplace_back(v.begin(), v.end());
  }
  return {loss.item<double>(), grads};
}

// The same step as run_toygpt, on the llama model above, from the harness's weights.
Result run_llama(const Args& a) {
  const bench::LlamaShape g;
  Result r;
  if (!a.skip_check) bench::check_llama(g, [&](const auto& w, const auto& seq, std::size_t n) {
    return llama_loss_and_grads(g, w, seq, n);
  }, r);
  const Llama model(g, bench::llama_train_weights(g, bench::llama_parameters(g)));
  torch::optim::AdamW opt(model.p, torch::optim::AdamWOptions(g.lr)
                                       .betas({g.beta1, g.beta2})
                                       .eps(g.eps)
                                       .weight_decay(g.weight_decay));
  const auto [tokens, targets] = next_token_batch(bench::toygpt_tokens(g), g.batch, g.context);
  std::vector<double> losses;
  r.time_steps(a.warmup, a.repeats, [&] {
    opt.zero_grad();
    torch::Tensor loss = model.loss(tokens, targets);
    loss.backward();
    opt.step();
    losses.push_back(loss.item<double>());
  });
  bench::check_toygpt_losses(g, losses, r, "llama");
  double count = 0;
  for (const auto& t : model.p) count += double(t.numel());
  r.add("parameters", count);
  r.add("gflops", bench::llama_flops(g) / (bench::median(r.samples_ms) * 1e6));
  return r;
}

// ------------------------------------------------------------ cached decode

// The cached decode workload (one token at a time against a KV cache; see
// bench::decode_shape) written out in libtorch 1.13, as a PyTorch user writes a KV cache by
// hand: per layer, K and V tensors (1, kv_heads, context, head_dim) allocated once; a step
// writes the token's rotated key and its value at its position with narrow().copy_(), and
// attends over narrow(0 .. position). The 8 query heads
// are viewed as (kv_heads, 4) so that each group of 4 reads its K/V head by broadcasting in
// the matmuls (repeat_interleave's head order, no copy). Llama's parameters, RoPE tables,
// RMSNorm and SwiGLU; the token is a (1, 1) tensor and the argmax stays one.
struct LlamaDecoder {
  const Llama& m;
  std::vector<torch::Tensor> K, V;  // one per layer

  explicit LlamaDecoder(const Llama& model) : m(model) {
    const int64_t kv = int64_t(m.g.kv_heads), ctx = int64_t(m.g.context), dh = int64_t(m.g.head_dim());
    for (std::size_t l = 0; l < m.g.layers; ++l) {
      K.push_back(torch::zeros({1, kv, ctx, dh}));
      V.push_back(torch::zeros({1, kv, ctx, dh}));
    }
  }
  // x (..., dh) at one position: x * cos + rotate_half(x) * sin, the tables' row `pos`
  static torch::Tensor rope(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
    const int64_t half = x.size(-1) / 2;
    return x * cos + torch::cat({-x.slice(-1, half), x.slice(-1, 0, half)}, -1) * sin;
  }
  // token (1, 1) int64 at position pos -> logits (1, 1, vocab); the caches gain position pos
  torch::Tensor step(const torch::Tensor& token, int64_t pos) {
    const bench::LlamaShape& g = m.g;
    const int64_t kv = int64_t(g.kv_heads), group = int64_t(g.heads / g.kv_heads),
                  dh = int64_t(g.head_dim()), H = int64_t(g.heads);
    const torch::Tensor cos = m.cos.narrow(0, pos, 1), sin = m.sin.narrow(0, pos, 1);
    torch::Tensor x = torch::embedding(m.p[0], token);  // (1, 1, D)
    for (std::size_t l = 0; l < g.layers; ++l) {
      const torch::Tensor h = m.rms_norm(x, m.P(l, bench::kNorm1));
      const torch::Tensor q = rope(torch::matmul(h, m.P(l, bench::kWq)).view({1, kv, group, dh}), cos, sin);
      const torch::Tensor k = rope(torch::matmul(h, m.P(l, bench::kWk)).view({1, kv, 1, dh}), cos, sin);
      K[l].narrow(2, pos, 1).copy_(k);
      V[l].narrow(2, pos, 1).copy_(torch::matmul(h, m.P(l, bench::kWv)).view({1, kv, 1, dh}));
      const torch::Tensor keys = K[l].narrow(2, 0, pos + 1), values = V[l].narrow(2, 0, pos + 1);
      const torch::Tensor scores = torch::matmul(q, keys.transpose(-2, -1)) / std::sqrt(double(dh));
      const torch::Tensor o = torch::matmul(torch::softmax(scores, -1), values).reshape({1, 1, H * dh});
      x = x + torch::matmul(o, m.P(l, bench::kWo));
      x = x + m.swiglu(m.rms_norm(x, m.P(l, bench::kNorm2)), l);
    }
    const std::size_t last = 1 + g.layers * bench::kPerLayer;
    return torch::matmul(m.rms_norm(x, m.p[last]), m.p[last + 1]);
  }
  // tokens[0 .. n-1) one step each from position 0 (the same step as the timed one)
  void prefill(const std::vector<std::int64_t>& tokens, std::size_t n) {
    for (std::size_t t = 0; t < n; ++t)
      step(torch::full({1, 1}, tokens[t], torch::kInt64), int64_t(t));
  }
};

std::vector<double> decode_logits(const bench::LlamaShape& g, const bench::LlamaWeights& w,
                                  const std::vector<std::int64_t>& tokens) {
  torch::NoGradGuard no_grad;
  const Llama m(g, w);
  LlamaDecoder d(m);
  d.prefill(tokens, tokens.size() - 1);
  const torch::Tensor logits =
      d.step(torch::full({1, 1}, tokens.back(), torch::kInt64), int64_t(tokens.size() - 1));
  const std::vector<float> v = values<float>(logits);
  return std::vector<double>(v.begin(), v.end());
}

// The cache prefilled with context - 1 tokens; each timed step decodes one token at
// position context - 1 and takes its argmax (the next step's token); the untimed second
// part rolls the position back, so the next step overwrites the same slot and attends over
// the same `context` keys.
Result run_decode(const Args& a, std::size_t context) {
  const bench::LlamaShape g = bench::decode_shape(context);
  Result r;
  if (!a.skip_check) bench::check_decode(g, [&](const auto& w, const auto& t) {
    return decode_logits(g, w, t);
  }, r);
  torch::NoGradGuard no_grad;
  const Llama model(g, bench::llama_train_weights(g, bench::llama_parameters(g)));
  LlamaDecoder d(model);
  const std::vector<std::int64_t> tokens = bench::decode_tokens(g);
  d.prefill(tokens, g.context - 1);
  torch::Tensor tok = torch::full({1, 1}, tokens.back(), torch::kInt64);
  int64_t pos = int64_t(g.context) - 1;
  r.time_parts(a.warmup, a.repeats, {[&] { tok = d.step(tok, pos++).argmax(-1); },
                                     [&] { pos = int64_t(g.context) - 1; }});
  g_sink = g_sink + double(tok.item<int64_t>());
  r.add("context", double(g.context));
  double count = 0;
  for (const auto& t : model.p) count += double(t.numel());
  r.add("parameters", count);
  r.add("tokens_per_s", 1e3 / bench::median(r.samples_ms));
  r.add("gflops", bench::decode_flops(g) / (bench::median(r.samples_ms) * 1e6));
  return r;
}

}  // namespace torch_reference
