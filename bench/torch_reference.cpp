// libtorch side of the tapegrad/libtorch benchmark: the same workloads, shapes, dtypes, inputs and
// command line as tapegrad_bench.cpp (see harness.hpp), written as a PyTorch user writes
// them in C++. One workload per process, one JSON line out.
#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <unistd.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "harness.hpp"
#include "llama_reference.hpp"

namespace {

using bench::Args;
using bench::MhaInputs;
using bench::MhaShape;
using bench::Result;

volatile double g_sink = 0;

template <class R>
torch::Dtype dtype_of() {
  return sizeof(R) == 8 ? torch::kFloat64 : torch::kFloat32;
}

template <class R>
torch::Tensor tensor_of(const std::vector<double>& v, std::vector<int64_t> shape, bool rg) {
  torch::Tensor t = torch::tensor(v, torch::kFloat64).to(dtype_of<R>()).reshape(shape).contiguous();
  return t.set_requires_grad(rg);
}

template <class R>
std::vector<R> values(const torch::Tensor& t) {
  torch::Tensor c = t.detach().contiguous();
  const R* p = c.data_ptr<R>();
  return std::vector<R>(p, p + c.numel());
}

// ------------------------------------------------------------ multi-head attention

// Multi-head attention as the textbook composition a PyTorch user writes by hand (the
// semantics tapegrad's multi_head_attention has): project, split heads with reshape +
// transpose, scaled scores, -inf where the causal mask forbids, softmax, weights @ V,
// merge heads, project through Wo. `blocked` is ~causal_mask(T), built once per shape as
// a PyTorch module keeps it in a buffer (so libtorch is not charged for rebuilding it).
torch::Tensor mha(const torch::Tensor& x, const torch::Tensor& Wq, const torch::Tensor& Wk,
                  const torch::Tensor& Wv, const torch::Tensor& Wo, int64_t heads,
                  const torch::Tensor& blocked) {
  const int64_t B = x.size(0), T = x.size(1), D = x.size(2), dh = D / heads;
  auto split = [&](const torch::Tensor& p) { return p.reshape({B, T, heads, dh}).transpose(1, 2); };
  const torch::Tensor q = split(torch::matmul(x, Wq));
  const torch::Tensor k = split(torch::matmul(x, Wk));
  const torch::Tensor v = split(torch::matmul(x, Wv));
  torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(double(dh));
  scores = scores.masked_fill(blocked, -std::numeric_limits<double>::infinity());
  const torch::Tensor w = torch::softmax(scores, -1);
  const torch::Tensor o = torch::matmul(w, v).transpose(1, 2).reshape({B, T, D});
  return torch::matmul(o, Wo);
}

// Grouped-query attention as a PyTorch 1.13 user writes it (no enable_gqa there): project
// k, v to kv heads, repeat_interleave them to `heads` along the head axis (query head h
// reads kv head h / (heads/kv_heads)), then the composition above. q (B, heads, T, dh),
// k and v (B, kv_heads, T, dh) -> merged (B, T, heads*dh), before the output projection.
torch::Tensor gqa_heads(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const torch::Tensor& blocked) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), dh = q.size(3), group = H / k.size(1);
  const torch::Tensor kk = k.repeat_interleave(group, 1), vv = v.repeat_interleave(group, 1);
  torch::Tensor scores = torch::matmul(q, kk.transpose(-2, -1)) / std::sqrt(double(dh));
  scores = scores.masked_fill(blocked, -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(scores, -1), vv).transpose(1, 2).reshape({B, T, H * dh});
}

torch::Tensor gqa(const torch::Tensor& x, const torch::Tensor& Wq, const torch::Tensor& Wk,
                  const torch::Tensor& Wv, const torch::Tensor& Wo, int64_t heads,
                  const torch::Tensor& blocked) {
  const int64_t B = x.size(0), T = x.size(1), dh = x.size(2) / heads;
  auto split = [&](const torch::Tensor& p) { return p.reshape({B, T, -1, dh}).transpose(1, 2); };
  return torch::matmul(gqa_heads(split(torch::matmul(x, Wq)), split(torch::matmul(x, Wk)),
                                 split(torch::matmul(x, Wv)), blocked),
                       Wo);
}

torch::Tensor blocked_mask(int64_t T) {
  return torch::ones({T, T}, torch::kBool).tril().logical_not();
}

template <class R>
struct MhaTensors {
  torch::Tensor x, Wq, Wk, Wv, Wo, blocked;
  int64_t heads;
  bool grouped;
  MhaTensors(const MhaInputs& in, const MhaShape& s, bool rg)
      : x(tensor_of<R>(in.x, {int64_t(s.B), int64_t(s.T), int64_t(s.D)}, rg)),
        Wq(tensor_of<R>(in.Wq, {int64_t(s.D), int64_t(s.D)}, rg)),
        Wk(tensor_of<R>(in.Wk, {int64_t(s.D), int64_t(s.kv_width())}, rg)),
        Wv(tensor_of<R>(in.Wv, {int64_t(s.D), int64_t(s.kv_width())}, rg)),
        Wo(tensor_of<R>(in.Wo, {int64_t(s.D), int64_t(s.D)}, rg)),
        blocked(blocked_mask(int64_t(s.T))),
        heads(int64_t(s.H)),
        grouped(s.KV != 0) {}
  // MHA shapes run the textbook composition mha(), GQA shapes (KV set) the repeat_interleave one
  torch::Tensor forward() const {
    return grouped ? gqa(x, Wq, Wk, Wv, Wo, heads, blocked) : mha(x, Wq, Wk, Wv, Wo, heads, blocked);
  }
  void zero_grad() {  // set_to_none, as optimizer.zero_grad() does by default in 2.x
    for (torch::Tensor* t : {&x, &Wq, &Wk, &Wv, &Wo}) t->mutable_grad() = torch::Tensor();
  }
};

template <class R>
void check_mha_at(const MhaShape& s, bool with_backward, Result& r) {
  const MhaInputs in = bench::make_mha_inputs(s);
  std::function<std::vector<R>(const MhaInputs&)> fwd = [&](const MhaInputs& i) {
    torch::NoGradGuard no_grad;
    return values<R>(MhaTensors<R>(i, s, false).forward());
  };
  std::function<std::vector<std::vector<R>>(const MhaInputs&)> bwd;
  if (with_backward)
    bwd = [&](const MhaInputs& i) {
      MhaTensors<R> t(i, s, true);
      t.forward().backward(tensor_of<R>(i.G, {int64_t(s.B), int64_t(s.T), int64_t(s.D)}, false));
      return std::vector<std::vector<R>>{values<R>(t.x.grad()), values<R>(t.Wq.grad()),
                                         values<R>(t.Wk.grad()), values<R>(t.Wv.grad()),
                                         values<R>(t.Wo.grad())};
    };
  bench::check_mha<R>(s, in, fwd, bwd, r);
}

template <class R>
Result run_mha(const Args& a, const bench::MhaWorkload& w) {
  const MhaShape& s = w.shape;
  Result r;
  Result s1_check;
  if (!a.skip_check) {
    check_mha_at<R>(bench::mha_shape("S1"), w.backward, s1_check);
    check_mha_at<R>(s, w.backward, r);
  }

  const MhaInputs in = bench::make_mha_inputs(s);
  MhaTensors<R> t(in, s, w.backward);
  const torch::Tensor G = tensor_of<R>(in.G, {int64_t(s.B), int64_t(s.T), int64_t(s.D)}, false);
  if (w.backward) {
    r.time_steps(a.warmup, a.repeats, [&] {
      t.zero_grad();
      torch::Tensor y = t.forward();
      y.backward(G);
      g_sink = g_sink + t.x.grad().template data_ptr<R>()[0];
    });
  } else {
    r.time_steps(a.warmup, a.repeats, [&] {
      torch::NoGradGuard no_grad;
      torch::Tensor y = t.forward();
      g_sink = g_sink + y.data_ptr<R>()[0];
    });
  }
  r.add("gflops", bench::mha_flops(s, w.backward) / (bench::median(r.samples_ms) * 1e6));
  return r;
}

// ------------------------------------------------------------ grouped-query attention

// As tapegrad_bench's run_gqa: GQA fwd+bwd (the row's time) and, in the same loop, MHA at
// the same shape through the textbook composition mha() (the mha_fwdbwd workload's step).
Result run_gqa(const Args& a, const bench::MhaWorkload& w) {
  const MhaShape& s = w.shape;
  const MhaShape mha_s = bench::mha_shape(s.name);
  Result r;
  Result s1_check;
  if (!a.skip_check) {
    check_mha_at<float>(bench::gqa_shape("S1"), true, s1_check);
    check_mha_at<float>(s, true, r);
  }
  const MhaInputs in = bench::make_mha_inputs(s), in_mha = bench::make_mha_inputs(mha_s);
  MhaTensors<float> t(in, s, true), t_mha(in_mha, mha_s, true);
  const torch::Tensor G = tensor_of<float>(in.G, {int64_t(s.B), int64_t(s.T), int64_t(s.D)}, false);
  auto step = [&](MhaTensors<float>& tt) {
    tt.zero_grad();
    tt.forward().backward(G);
    g_sink = g_sink + tt.x.grad().data_ptr<float>()[0];
  };
  const auto wall = r.time_parts(a.warmup, a.repeats, {[&] { step(t); }, [&] { step(t_mha); }});
  const double gqa_ms = bench::median(wall[0]), mha_ms = bench::median(wall[1]);
  r.add("gflops", bench::mha_flops(s, true) / (gqa_ms * 1e6));
  r.add("mha_ms", mha_ms);
  r.add("mha_min_ms", *std::min_element(wall[1].begin(), wall[1].end()));
  r.add("mha_over_gqa", mha_ms / gqa_ms);
  return r;
}

// ------------------------------------------------------------ TOY-GPT training step

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

// ------------------------------------------------------------ long-context attention

// libtorch 1.13 has no flash kernel and no scaled_dot_product_attention: causal attention is
// the composition a 1.13 user writes (the scores and weights materialised as (B, H, T, T)),
// on q, k, v leaves of (B, T, H * dh) as tapegrad's.
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               int64_t heads, const torch::Tensor& blocked) {
  const int64_t B = q.size(0), T = q.size(1), dh = q.size(2) / heads;
  auto split = [&](const torch::Tensor& p) { return p.reshape({B, T, heads, dh}).transpose(1, 2); };
  torch::Tensor scores = torch::matmul(split(q), split(k).transpose(-2, -1)) / std::sqrt(double(dh));
  scores = scores.masked_fill(blocked, -std::numeric_limits<double>::infinity());
  return torch::matmul(torch::softmax(scores, -1), split(v)).transpose(1, 2).reshape({B, T, heads * dh});
}

Result run_flash(const Args& a, const bench::FlashShape& s) {
  // forward keeps the scores, the masked scores and the weights, (B, H, T, T) floats each
  const double need = 3.0 * double(s.B * s.H) * double(s.T) * double(s.T) * 4.0;
  const double have = double(sysconf(_SC_PAGE_SIZE)) * double(sysconf(_SC_PHYS_PAGES));
  if (need > 0.75 * have) {
    std::fprintf(stderr, "torch_reference: %s does not fit: its (B, H, T, T) tensors need %.0f GiB, "
                 "the machine has %.0f GiB\n", a.workload.c_str(), need / 1073741824.0, have / 1073741824.0);
    std::exit(5);
  }
  const bench::FlashInputs in = bench::make_flash_inputs(s);
  const std::vector<int64_t> shape = {int64_t(s.B), int64_t(s.T), int64_t(s.width())};
  torch::Tensor q = tensor_of<float>(in.q, shape, true), k = tensor_of<float>(in.k, shape, true),
                v = tensor_of<float>(in.v, shape, true);
  const torch::Tensor dO = tensor_of<float>(in.dO, shape, false), blocked = blocked_mask(int64_t(s.T));
  auto step = [&] {
    for (torch::Tensor* t : {&q, &k, &v}) t->mutable_grad() = torch::Tensor();
    torch::Tensor out = causal_attention(q, k, v, int64_t(s.H), blocked);
    out.backward(dO);
    return out;
  };
  Result r;
  if (!a.skip_check) {
    const torch::Tensor out = step();
    bench::check_flash<float>(s, in, values<float>(out), values<float>(q.grad()), values<float>(k.grad()),
                              values<float>(v.grad()), r);
  }
  r.time_steps(a.warmup, a.repeats, [&] {
    step();
    g_sink = g_sink + q.grad().data_ptr<float>()[0];
  });
  r.add("T", double(s.T));
  r.add("gflops", bench::flash_useful_flops(s) / (bench::median(r.samples_ms) * 1e6));
  return r;
}

// ------------------------------------------------------------ 1,000-op chain

Result run_chain(const Args& a) {
  const auto [xv, bv] = bench::make_chain_inputs();
  torch::Tensor x = tensor_of<float>(xv, {int64_t(bench::kChainLen)}, true);
  torch::Tensor b = tensor_of<float>(bv, {int64_t(bench::kChainLen)}, true);
  float loss = 0;
  auto step = [&] {
    x.mutable_grad() = torch::Tensor();
    b.mutable_grad() = torch::Tensor();
    torch::Tensor y = x;
    for (std::size_t i = 0; i < bench::kChainOps; ++i)
      y = i % 3 == 0 ? y * 0.9f : i % 3 == 1 ? y + b : torch::tanh(y);
    torch::Tensor L = y.sum();
    L.backward();
    loss = L.item<float>();
  };
  step();
  const bench::ChainReference ref = bench::naive_chain(xv, bv);
  Result r;
  const double e_loss = std::abs(loss - ref.loss) / std::abs(ref.loss);
  const double e_dx = bench::max_rel_error(values<float>(x.grad()), ref.dx);
  const double e_db = bench::max_rel_error(values<float>(b.grad()), ref.db);
  r.add("check_loss_rel_err", e_loss);
  r.add("check_grad_rel_err", std::max(e_dx, e_db));
  bench::require(e_loss < 1e-4 && e_dx < 1e-3 && e_db < 1e-3,
                 "chain loss/gradients differ from the naive loop");
  r.time_steps(a.warmup, a.repeats, step);
  return r;
}

// ------------------------------------------------------------ batched matmul in attention

// The same three timings as tapegrad_bench: torch::matmul(q, k^T) allocating its result,
// bmm_out into a reused buffer, and one square mm_out of the same FLOPs.
Result run_bmm(const Args& a, const MhaShape& s) {
  const int64_t B = int64_t(s.B), H = int64_t(s.H), T = int64_t(s.T), dh = int64_t(s.D / s.H);
  bench::Rng rng(3);
  const torch::Tensor q = tensor_of<float>(rng.normals(s.B * s.H * s.T * (s.D / s.H), 1.0), {B, H, T, dh}, false);
  const torch::Tensor k = tensor_of<float>(rng.normals(s.B * s.H * s.T * (s.D / s.H), 1.0), {B, H, T, dh}, false);
  const int64_t n = int64_t(bench::same_flops_gemm_n(s));
  std::vector<double> av(std::size_t(n * n)), bv(std::size_t(n * n));
  for (auto& v : av) v = double(float(rng.normal()));
  for (auto& v : bv) v = double(float(rng.normal()));
  const torch::Tensor A = tensor_of<float>(av, {n, n}, false), Bm = tensor_of<float>(bv, {n, n}, false);
  torch::Tensor C = torch::empty({n, n}, torch::kFloat32);
  torch::Tensor S = torch::empty({B * H, T, T}, torch::kFloat32);
  const torch::Tensor q3 = q.reshape({B * H, T, dh}), k3t = k.reshape({B * H, T, dh}).transpose(1, 2);

  torch::NoGradGuard no_grad;
  Result r;
  {
    const torch::Tensor sc = torch::matmul(q, k.transpose(-2, -1)).contiguous();
    const float* qp = q.data_ptr<float>();
    const float* kp = k.data_ptr<float>();
    const int64_t total = B * H * T * T;
    double err = 0;
    for (int64_t e : {int64_t(0), total / 2 + 7, total - 1}) {
      const int64_t bh = e / (T * T), i = (e / T) % T, j = e % T;
      double want = 0;
      for (int64_t d = 0; d < dh; ++d) want += double(qp[(bh * T + i) * dh + d]) * double(kp[(bh * T + j) * dh + d]);
      err = std::max(err, std::abs(sc.data_ptr<float>()[e] - want) / (1 + std::abs(want)));
    }
    r.add("check_rel_err", err);
    bench::require(err < 1e-4, "torch::matmul differs from a naive dot product");
  }

  // The op (allocating its result), bmm into a reused buffer and one square sgemm of the
  // same FLOPs, each timed alone.
  const auto wall = r.time_parts(
      a.warmup, a.repeats,
      {[&] {
         const torch::Tensor sc = torch::matmul(q, k.transpose(-2, -1));
         g_sink = g_sink + sc.data_ptr<float>()[0];
       },
       [&] {
         torch::bmm_out(S, q3, k3t);
         g_sink = g_sink + S.data_ptr<float>()[0];
       },
       [&] {
         torch::mm_out(C, A, Bm);
         g_sink = g_sink + C.data_ptr<float>()[0];
       }});
  const std::vector<double>& kernel_ms = wall[1];
  const std::vector<double>& sgemm_ms = wall[2];
  const double flops = bench::bmm_flops(s);
  const double op = flops / (bench::median(r.samples_ms) * 1e6);
  const double kern = flops / (bench::median(kernel_ms) * 1e6);
  const double big = 2.0 * double(n) * double(n) * double(n) / (bench::median(sgemm_ms) * 1e6);
  r.add("gflops", op);
  r.add("kernel_ms", bench::median(kernel_ms));
  r.add("kernel_gflops", kern);
  r.add("sgemm_n", double(n));
  r.add("sgemm_ms", bench::median(sgemm_ms));
  r.add("sgemm_gflops", big);
  r.add("fraction", op / big);
  r.add("kernel_fraction", kern / big);
  return r;
}

// ------------------------------------------------------------ the gemm ceiling

template <class R>
Result run_gemm_peak(const Args& a) {
  const int64_t n = int64_t(bench::kGemmPeakN);
  bench::Rng rng(5);
  const torch::Tensor A = tensor_of<R>(rng.normals(std::size_t(n * n), 1.0), {n, n}, false);
  const torch::Tensor B = tensor_of<R>(rng.normals(std::size_t(n * n), 1.0), {n, n}, false);
  torch::Tensor C = torch::empty({n, n}, dtype_of<R>());
  torch::NoGradGuard no_grad;
  torch::mm_out(C, A, B);
  double want = 0;
  for (int64_t k = 0; k < n; ++k) want += double(A.data_ptr<R>()[7 * n + k]) * double(B.data_ptr<R>()[k * n + 3]);
  const double err = std::abs(C.data_ptr<R>()[7 * n + 3] - want) / (1 + std::abs(want));
  Result r;
  r.add("check_rel_err", err);
  bench::require(err < 1e-3, "torch::mm differs from a naive dot product");
  r.time_steps(a.warmup, a.repeats, [&] {
    torch::mm_out(C, A, B);
    g_sink = g_sink + double(C.data_ptr<R>()[0]);
  });
  r.add("gflops", 2.0 * double(n * n) * double(n) / (bench::median(r.samples_ms) * 1e6));
  return r;
}

// Debian's libtorch calls BLAS through libblas.so.3, which is OpenBLAS here; torch does not
// know it is OpenBLAS, so its thread count is looked up rather than assumed.
int blas_threads() {
  using Fn = int (*)();
  auto f = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  return f ? f() : -1;
}

// torch::set_num_threads does not reach OpenBLAS in Debian's build (BLAS_INFO=generic):
// left alone, OpenBLAS would run every gemm on all cores even at --threads 1. The same
// thread count for both frameworks means telling OpenBLAS too.
void set_blas_threads(int n) {
  using Fn = void (*)(int);
  auto f = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (f) f(n);
}

void print_info() {
  nlohmann::ordered_json info;
  info["framework"] = "libtorch";
  info["version"] = TORCH_VERSION;
  info["intra_op_threads"] = at::get_num_threads();
  info["openblas_threads"] = blas_threads();
  info["config"] = at::show_config() + at::get_parallel_info();
  std::printf("%s\n", info.dump().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const long start_rss = bench::peak_rss_kb();
  const Args a = bench::parse_args(argc, argv);
  if (a.list) {
    for (const auto& w : bench::workload_names()) std::printf("%s\n", w.c_str());
    return 0;
  }
  // Intra-op threads as asked; no inter-op pool (one stream of ops, as in training).
  at::set_num_interop_threads(1);
  torch::set_num_threads(a.threads);
  set_blas_threads(a.threads);
  if (a.info) {
    print_info();
    return 0;
  }
  Result r;
  bench::MhaWorkload mha_w;
  if (bench::parse_mha(a.workload, mha_w)) {
    r = mha_w.is_double ? run_mha<double>(a, mha_w) : run_mha<float>(a, mha_w);
  } else if (bench::parse_gqa(a.workload, mha_w)) {
    r = run_gqa(a, mha_w);
  } else if (a.workload == "toygpt_step") {
    r = run_toygpt(a);
  } else if (a.workload == "llama_step") {
    r = run_llama(a);
  } else if (const std::size_t ctx = bench::parse_decode(a.workload)) {
    r = run_decode(a, ctx);
  } else if (const bench::FlashShape fs = bench::parse_flash(a.workload); fs.T != 0) {
    r = run_flash(a, fs);
  } else if (a.workload == "chain1000") {
    r = run_chain(a);
  } else if (a.workload.rfind("bmm_", 0) == 0) {
    r = run_bmm(a, bench::mha_shape(a.workload.substr(4)));
  } else if (a.workload == "gemm_peak_f32") {
    r = run_gemm_peak<float>(a);
  } else if (a.workload == "gemm_peak_f64") {
    r = run_gemm_peak<double>(a);
  } else {
    std::fprintf(stderr, "torch_reference: unknown workload %s (--list names them)\n", a.workload.c_str());
    return 4;
  }
  r.add("blas_threads", blas_threads());
  bench::print_json("libtorch", a, r, start_rss);
  return 0;
}
