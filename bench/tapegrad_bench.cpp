// tapegrad side of the tapegrad/libtorch benchmark: one workload per process, one JSON line out.
// The same command line and the same inputs as torch_reference.cpp (see harness.hpp).
#include <array>
#include <optional>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "harness.hpp"
#include "llama_reference.hpp"
#include "ops/attention.hpp"
#include "nn/config.hpp"
#include "nn/kv_cache.hpp"
#include "nn/io/npz.hpp"
#include "nn/optim.hpp"
#include "nn/transformer.hpp"
#include "ops/kernels/gemm.hpp"
#include "tapegrad.hpp"

extern "C" {
char* openblas_get_config();
char* openblas_get_corename();
int openblas_get_num_threads();
}

namespace {

using namespace tapegrad;
using bench::Args;
using bench::MhaInputs;
using bench::MhaShape;
using bench::Result;

volatile double g_sink = 0;  // keeps results observable so no step is optimised away

// An attention modifier a workload's name may end with (bench::kModifierSuffixes): the same
// workload with every attention's spec carrying it. Set once in main, before the workload.
enum class Modifier { none, alibi, softcap };
Modifier g_modifier = Modifier::none;
// decode_ctx1024_kvbf16: the decode workload with its KV cache stored in bf16
KVDtype g_kv_dtype = KVDtype::model;
// gpt2_124M_step_B4T1024_ckpt: the step with every block checkpointed (its input kept, the
// block recomputed in the backward); bitwise the same gradients, so the start-up check holds
bool g_checkpoint_blocks = false;
constexpr double kBenchSoftcap = 50;  // Gemma 2's attention cap

void apply_modifier(AttentionSpec& spec) {
  if (g_modifier == Modifier::alibi) spec.bias = PositionBias::alibi;
  if (g_modifier == Modifier::softcap) spec.softcap = kBenchSoftcap;
}

// "llama_step_alibi" -> "llama_step" with g_modifier = alibi; other names are left alone.
void take_modifier(std::string& workload) {
  const std::pair<const char*, Modifier> suffixes[] = {{"_alibi", Modifier::alibi},
                                                       {"_softcap", Modifier::softcap}};
  for (const auto& [suffix, modifier] : suffixes) {
    const std::string tail(suffix);
    if (workload.size() > tail.size() &&
        workload.compare(workload.size() - tail.size(), tail.size(), tail) == 0) {
      workload.resize(workload.size() - tail.size());
      g_modifier = modifier;
    }
  }
}

template <class R>
Tensor<R> tensor_of(const std::vector<double>& v, const Shape& shape, bool requires_grad) {
  Array<R> a = Array<R>::from_shape(shape);
  std::copy(v.begin(), v.end(), a.begin());
  return Tensor<R>(std::move(a), requires_grad);
}

template <class R>
std::vector<R> values(const Array<R>& a) {
  return std::vector<R>(a.begin(), a.end());
}

// ------------------------------------------------------------ multi-head attention

template <class R>
struct MhaTensors {
  Tensor<R> x, Wq, Wk, Wv, Wo;
  MhaTensors(const MhaInputs& in, const MhaShape& s, bool rg)
      : x(tensor_of<R>(in.x, {s.B, s.T, s.D}, rg)),
        Wq(tensor_of<R>(in.Wq, {s.D, s.D}, rg)),
        Wk(tensor_of<R>(in.Wk, {s.D, s.kv_width()}, rg)),
        Wv(tensor_of<R>(in.Wv, {s.D, s.kv_width()}, rg)),
        Wo(tensor_of<R>(in.Wo, {s.D, s.D}, rg)) {}
  Tensor<R> forward(std::size_t heads) const {
    return multi_head_attention(x, Wq, Wk, Wv, Wo, heads, /*causal=*/true);
  }
  // The model's path (MultiHeadAttention::forward without RoPE): project, attention() on
  // the spec (fused, kv heads read in place), project back. Any kv_heads.
  Tensor<R> forward(const AttentionSpec& spec, AttentionPath path = AttentionPath::fused) const {
    return matmul(attention(matmul(x, Wq), matmul(x, Wk), matmul(x, Wv), spec, path).out, Wo);
  }
  void zero_grad() {
    for (Tensor<R>* t : {&x, &Wq, &Wk, &Wv, &Wo}) t->zero_grad();
  }
};

// The causal spec of shape s: s.kv() K/V heads of D/H columns each, and the workload's
// modifier.
AttentionSpec causal_spec_of(const MhaShape& s) {
  AttentionSpec spec = causal_spec(s.H, s.kv());
  spec.head_dim = s.D / s.H;
  apply_modifier(spec);
  return spec;
}

// MHA shapes run multi_head_attention (the textbook composition's op), GQA shapes
// attention() on the spec. The op has no modifiers: an MHA shape with one runs attention()
// on the path the op takes (flash from kFlashFromKeys keys, fused below).
template <class R>
Tensor<R> forward_of(const MhaTensors<R>& t, const MhaShape& s) {
  if (s.KV != 0) return t.forward(causal_spec_of(s));
  if (g_modifier == Modifier::none) return t.forward(s.H);
  return t.forward(causal_spec_of(s), default_attention_path(s.T, false));
}

template <class R>
void check_mha_at(const MhaShape& s, bool with_backward, Result& r) {
  const MhaInputs in = bench::make_mha_inputs(s);
  std::function<std::vector<R>(const MhaInputs&)> fwd = [&](const MhaInputs& i) {
    NoGradGuard no_grad;
    return values(forward_of(MhaTensors<R>(i, s, false), s).value());
  };
  std::function<std::vector<std::vector<R>>(const MhaInputs&)> bwd;
  if (with_backward)
    bwd = [&](const MhaInputs& i) {
      MhaTensors<R> t(i, s, true);
      forward_of(t, s).backward(tensor_of<R>(i.G, {s.B, s.T, s.D}, false).value());
      return std::vector<std::vector<R>>{values(t.x.grad()), values(t.Wq.grad()),
                                         values(t.Wk.grad()), values(t.Wv.grad()),
                                         values(t.Wo.grad())};
    };
  bench::check_mha<R>(s, in, fwd, bwd, r);
}

template <class R>
Result run_mha(const Args& a, const bench::MhaWorkload& w) {
  const MhaShape& s = w.shape;
  Result r;
  Result s1_check;  // S1 is always checked too: small, and every code path of the op
  if (!a.skip_check) {
    check_mha_at<R>(bench::mha_shape("S1"), w.backward, s1_check);
    check_mha_at<R>(s, w.backward, r);
  }

  const MhaInputs in = bench::make_mha_inputs(s);
  MhaTensors<R> t(in, s, w.backward);
  const Array<R> G = tensor_of<R>(in.G, {s.B, s.T, s.D}, false).value();
  if (w.backward) {
    r.time_steps(a.warmup, a.repeats, [&] {
      t.zero_grad();
      Tensor<R> y = forward_of(t, s);
      y.backward(G);
      g_sink = g_sink + double(t.x.grad()(0));
    });
  } else {
    r.time_steps(a.warmup, a.repeats, [&] {
      NoGradGuard no_grad;
      Tensor<R> y = forward_of(t, s);
      g_sink = g_sink + double(y.data()[0]);
    });
  }
  r.add("gflops", bench::mha_flops(s, w.backward) / (bench::median(r.samples_ms) * 1e6));
  return r;
}

// ------------------------------------------------------------ grouped-query attention

// GQA fwd+bwd at its shape (kv_heads = heads/4), and in the same loop the same path with
// kv_heads = heads (MHA) on the MHA inputs of that shape, so the saving of sharing K/V heads
// is measured within one process. The row's time is GQA's; the MHA part is extra.
Result run_gqa(const Args& a, const bench::MhaWorkload& w) {
  const MhaShape& s = w.shape;
  const MhaShape mha = bench::mha_shape(s.name);
  Result r;
  Result s1_check;  // at S1 kv_heads = 1 (multi-query): every head reads the one K/V head
  if (!a.skip_check) {
    check_mha_at<float>(bench::gqa_shape("S1"), true, s1_check);
    check_mha_at<float>(s, true, r);
  }
  const MhaInputs in = bench::make_mha_inputs(s), in_mha = bench::make_mha_inputs(mha);
  MhaTensors<float> t(in, s, true), t_mha(in_mha, mha, true);
  const Array<float> G = tensor_of<float>(in.G, {s.B, s.T, s.D}, false).value();
  const AttentionSpec spec = causal_spec_of(s), spec_mha = causal_spec_of(mha);
  auto step = [&](MhaTensors<float>& tt, const AttentionSpec& sp) {
    tt.zero_grad();
    tt.forward(sp).backward(G);
    g_sink = g_sink + double(tt.x.grad()(0));
  };
  const auto wall = r.time_parts(a.warmup, a.repeats, {[&] { step(t, spec); }, [&] { step(t_mha, spec_mha); }});
  const double gqa_ms = bench::median(wall[0]), mha_ms = bench::median(wall[1]);
  r.add("gflops", bench::mha_flops(s, true) / (gqa_ms * 1e6));
  r.add("mha_ms", mha_ms);
  r.add("mha_min_ms", *std::min_element(wall[1].begin(), wall[1].end()));
  r.add("mha_over_gqa", mha_ms / gqa_ms);
  return r;
}

// ------------------------------------------------------------ TOY-GPT training step

// One step = zero_grad, forward + cross-entropy, backward, AdamW, as a training loop runs.
// TOY-GPT and GPT-2 small: the gpt2 preset at g's sizes; GPT-2 small as Hugging Face's block
// (q, k, v and output biases, the head tied to the token embedding).
TransformerConfig toygpt_config(const bench::ToyGptShape& g) {
  TransformerConfig c = gpt2_preset();
  c.vocab = g.vocab;
  c.context = g.context;
  c.d_model = g.d_model;
  c.heads = g.heads;
  c.layers = g.layers;
  c.mlp_ratio = g.mlp_ratio;
  c.norm = NormKind::layer_norm;
  if (g.hf_gpt2) c.attn_qkv_bias = c.attn_out_bias = c.tie_embeddings = true;
  c.checkpoint_activations = g_checkpoint_blocks;
  c.seed = 1;
  return c;
}

// The harness's AdamW settings, the ones the peers use.
AdamWOptions adamw_options(const bench::ToyGptShape& g) {
  AdamWOptions o;
  o.lr = g.lr;
  o.beta1 = g.beta1;
  o.beta2 = g.beta2;
  o.eps = g.eps;
  o.weight_decay = g.weight_decay;
  return o;
}

// The median GFLOP/s of a few 1024^3 sgemms at the workload's threads, in the same process
// (what gemm_peak_f32 times): the ceiling a GPT-2 step's GFLOP/s is read against.
double sgemm_peak_gflops(int repeats);

// The first nseq sequences of seq (B, T+1) as tokens [:, :T] and next-token targets [:, 1:].
std::pair<Indices, Indices> next_token_batch(const std::vector<std::int64_t>& seq, std::size_t nseq,
                                             std::size_t T);

// toygpt_step and gpt2_124M_step_*: the model of toygpt_config(g) from its initialisation,
// the fixed batch of toygpt_tokens(g), the timed step as a training loop runs it.
Result run_toygpt(const Args& a, const bench::ToyGptShape& g) {
  Transformer<float> model(toygpt_config(g));
  AdamW<float> opt(model.parameters(), adamw_options(g));
  const auto [tokens, targets] = next_token_batch(bench::toygpt_tokens(g), g.batch, g.T());
  std::vector<double> losses;
  Result r;
  r.time_steps(a.warmup, a.repeats, [&] {
    opt.zero_grad();
    Tensor<float> loss = model.loss(tokens, targets);
    loss.backward();
    opt.step();
    losses.push_back(double(loss.item()));
  });
  const double ms = bench::median(r.samples_ms);
  bench::check_toygpt_losses(g, losses, r, g.hf_gpt2 ? "GPT-2" : "TOY-GPT");
  r.add("parameters", double(model.parameter_count()));
  if (!g.hf_gpt2) {
    r.add("gflops", bench::toygpt_flops(g) / (ms * 1e6));
    return r;
  }
  bench::require(double(model.parameter_count()) == bench::gpt2_parameters(g),
                 "GPT-2: the model's parameter count is not the harness's");
  const double gflops = bench::gpt2_flops(g) / (ms * 1e6), peak = sgemm_peak_gflops(5);
  r.add("tokens", double(g.tokens()));
  r.add("tokens_per_s", double(g.tokens()) * 1e3 / ms);
  r.add("step_gflop", bench::gpt2_flops(g) / 1e9);
  r.add("gflops", gflops);
  r.add("sgemm_gflops", peak);
  r.add("fraction_of_sgemm", gflops / peak);
  return r;
}

// ------------------------------------------------------------ llama training step

TransformerConfig llama_config(const bench::LlamaShape& g) {
  TransformerConfig c = llama_preset();
  c.vocab = g.vocab;
  c.context = g.context;
  c.d_model = g.d_model;
  c.heads = g.heads;
  c.layers = g.layers;
  c.mlp_ratio = g.mlp_ratio;
  c.kv_heads = g.kv_heads;  // what finish_preset would choose at TOY-GPT's size (heads / 2)
  finish_preset("llama", c);
  c.seed = 1;
  // ALiBi in place of RoPE (no parameters either way), or the scores capped
  if (g_modifier == Modifier::alibi) c.positions = PositionKind::alibi;
  if (g_modifier == Modifier::softcap) c.attn_softcap = kBenchSoftcap;
  return c;
}

// Builds the model and overwrites its parameters with w, after checking that its parameter
// list is the harness's, name for name and shape for shape (so both programs load the same
// numbers into the same places).
Transformer<float> llama_model(const bench::LlamaShape& g, const bench::LlamaWeights& w) {
  const TransformerConfig c = llama_config(g);
  bench::require(c.resolved_kv_heads() == g.kv_heads && c.resolved_mlp_hidden() == g.hidden() &&
                     (c.positions == PositionKind::rope || g_modifier == Modifier::alibi) &&
                     c.rope_theta == g.rope_theta &&
                     c.norm == NormKind::rms_norm && c.norm_eps == g.norm_eps,
                 "the llama preset is not the shape the benchmark describes");
  Transformer<float> m(c);
  const auto& named = m.named_parameters();
  const std::vector<bench::LlamaParam> ps = bench::llama_parameters(g);
  bench::require(named.size() == ps.size(), "llama: parameter count differs from the harness's");
  for (std::size_t i = 0; i < ps.size(); ++i) {
    Tensor<float> p = named[i].tensor;
    bench::require(named[i].name == ps[i].name && p.shape() == Shape(ps[i].shape.begin(), ps[i].shape.end()),
                   "llama parameter " + named[i].name + " " + p.shape_string() + " is not " + ps[i].name);
    std::copy(w[i].begin(), w[i].end(), p.value().begin());
  }
  return m;
}

std::pair<Indices, Indices> next_token_batch(const std::vector<std::int64_t>& seq, std::size_t nseq,
                                             std::size_t T) {
  Indices tokens = Indices::from_shape({nseq, T}), targets = Indices::from_shape({nseq, T});
  for (std::size_t b = 0; b < nseq; ++b)
    for (std::size_t t = 0; t < T; ++t) {
      tokens(b, t) = seq[b * (T + 1) + t];
      targets(b, t) = seq[b * (T + 1) + t + 1];
    }
  return {tokens, targets};
}

// The start-up check's side: loss and gradients of the first nseq sequences at weights w.
std::pair<double, bench::LlamaWeights> llama_loss_and_grads(const bench::LlamaShape& g,
                                                            const bench::LlamaWeights& w,
                                                            const std::vector<std::int64_t>& seq,
                                                            std::size_t nseq) {
  Transformer<float> m = llama_model(g, w);
  const auto [tokens, targets] = next_token_batch(seq, nseq, g.context);
  Tensor<float> loss = m.loss(tokens, targets);
  loss.backward();
  bench::LlamaWeights grads;
  for (const auto& p : m.named_parameters()) grads.emplace_back(p.tensor.grad().begin(), p.tensor.grad().end());
  return {double(loss.item()), grads};
}

// The same step as run_toygpt (zero_grad, forward + cross-entropy, backward, AdamW with the
// same settings) on Transformer<float> with the llama preset, from the harness's weights.
Result run_llama(const Args& a) {
  const bench::LlamaShape g;
  Result r;
  if (!a.skip_check) bench::check_llama(g, [&](const auto& w, const auto& seq, std::size_t n) {
    return llama_loss_and_grads(g, w, seq, n);
  }, r);
  Transformer<float> model = llama_model(g, bench::llama_train_weights(g, bench::llama_parameters(g)));
  AdamW<float> opt(model.parameters(), adamw_options(g));
  const auto [tokens, targets] = next_token_batch(bench::toygpt_tokens(g), g.batch, g.context);
  std::vector<double> losses;
  r.time_steps(a.warmup, a.repeats, [&] {
    opt.zero_grad();
    Tensor<float> loss = model.loss(tokens, targets);
    loss.backward();
    opt.step();
    losses.push_back(double(loss.item()));
  });
  bench::check_toygpt_losses(g, losses, r, "llama");
  r.add("parameters", double(model.parameter_count()));
  r.add("gflops", bench::llama_flops(g) / (bench::median(r.samples_ms) * 1e6));
  return r;
}

// ------------------------------------------------------------ mixture-of-experts step

// llama_step's model with its feed-forward split into 4 experts of half the hidden size,
// each token to 2 of them: the same active parameters, twice the total. The weights are
// the model's own initialisation (seed 1), which the peers load from the reference.
TransformerConfig moe_config(const bench::LlamaShape& g) {
  TransformerConfig c = llama_config(g);
  c.experts = 4;
  c.experts_top_k = 2;
  c.mlp_hidden = g.hidden() / 2;
  return c;
}

// The check's weights, at unit-scale activations as llama_check_weights (embedding 1,
// matrices and the router 1/sqrt(fan_in), gains 1 + 0.1 N): the router's probabilities
// then differ clearly from token to token, so a wrong top-k, renormalisation or auxiliary
// loss moves the loss and the gradients.
void set_check_weights(Transformer<float>& m) {
  bench::Rng r(23);
  for (const auto& p : m.named_parameters()) {
    Tensor<float> t = p.tensor;
    const bool gain = t.shape().size() == 1, embedding = p.name == "tok_emb.weight";
    const double sd = gain ? 0.1 : embedding ? 1.0 : 1.0 / std::sqrt(double(t.shape()[0]));
    const std::vector<double> v = r.normals(t.size(), sd);
    std::transform(v.begin(), v.end(), t.value().begin(), [&](double x) { return float(gain ? 1 + x : x); });
  }
}

// The timed step: zero_grad, the training loss (LM + auxiliary + z), backward, AdamW with
// llama_step's settings. The LM loss must fall over the timed steps.
Result run_moe(const Args& a) {
  const bench::LlamaShape g;
  const TransformerConfig c = moe_config(g);
  Transformer<float> model(c);
  AdamW<float> opt(model.parameters(), adamw_options(g));
  const auto [tokens, targets] = next_token_batch(bench::toygpt_tokens(g), g.batch, g.context);
  double first = 0, last = 0;
  Result r;
  std::size_t step = 0;
  r.time_steps(a.warmup, a.repeats, [&] {
    opt.zero_grad();
    const TrainingLoss<float> loss = model.training_loss(tokens, targets);
    loss.total.backward();
    opt.step();
    (step++ == 0 ? first : last) = double(loss.lm.item());
  });
  bench::require(step < 2 || (std::isfinite(last) && last < first),
                 "moe_step: the LM loss did not fall over the timed steps");
  r.add("parameters", double(model.parameter_count()));
  r.add("parameters_active", double(count_parameters(c).active()));
  r.add("gflops", bench::llama_flops(g) / (bench::median(r.samples_ms) * 1e6));
  return r;
}

// ------------------------------------------------------------ cached decode

// tokens (n) -> Indices (1, n)
Indices token_row(const std::vector<std::int64_t>& t, std::size_t n) {
  Indices row = Indices::from_shape({std::size_t(1), n});
  std::copy_n(t.begin(), n, row.begin());
  return row;
}

std::int64_t argmax(const Tensor<float>& logits) {
  const float* z = logits.data();
  return std::int64_t(std::max_element(z, z + logits.size()) - z);
}

// The start-up check's side: a fresh cache, the prompt in one forward, one decode step.
std::vector<double> decode_logits(const bench::LlamaShape& g, const bench::LlamaWeights& w,
                                  const std::vector<std::int64_t>& tokens) {
  NoGradGuard no_grad;
  Transformer<float> m = llama_model(g, w);
  KVCacheSet<float> caches(m.config(), 1, g.context);
  m.forward(token_row(tokens, tokens.size() - 1), caches);
  const Tensor<float> logits = m.forward(token_row({tokens.back()}, 1), caches);
  return std::vector<double>(logits.data(), logits.data() + logits.size());
}

// The cached decode workload (see bench::decode_shape): the cache (KVCacheSet, preallocated
// for the context) is prefilled with context - 1 tokens, then each timed step is
// Transformer::forward of one token through it under no-grad and the argmax of its logits,
// which is the next step's token. The untimed second part rolls the cache back: a copy of
// the prefilled set, whose key/value storage is shared, so the next step writes position
// context - 1 again and attends over the same `context` keys.
Result run_decode(const Args& a, std::size_t context) {
  const bench::LlamaShape g = bench::decode_shape(context);
  Result r;
  if (!a.skip_check) bench::check_decode(g, [&](const auto& w, const auto& t) {
    return decode_logits(g, w, t);
  }, r);
  NoGradGuard no_grad;
  Transformer<float> model = llama_model(g, bench::llama_train_weights(g, bench::llama_parameters(g)));
  const std::vector<std::int64_t> tokens = bench::decode_tokens(g);
  KVCacheSet<float> prefilled(model.config(), 1, g.context, g_kv_dtype);
  model.forward(token_row(tokens, g.context - 1), prefilled);
  KVCacheSet<float> caches = prefilled;
  Indices tok = token_row({tokens.back()}, 1);
  std::size_t seen = 0;
  r.time_parts(a.warmup, a.repeats, {[&] {
                                       tok(0, 0) = argmax(model.forward(tok, caches));
                                       seen += caches.length();
                                     },
                                     [&] { caches = prefilled; }});
  bench::require(seen == std::size_t(a.warmup + a.repeats) * g.context,
                 "decode: a timed step did not see the whole context");
  g_sink = g_sink + double(tok(0, 0));
  r.add("context", double(g.context));
  r.add("parameters", double(model.parameter_count()));
  r.add("tokens_per_s", 1e3 / bench::median(r.samples_ms));
  r.add("gflops", bench::decode_flops(g) / (bench::median(r.samples_ms) * 1e6));
  return r;
}

// ------------------------------------------------------------ long-context flash attention

// The model's path for long sequences: attention() on the flash kernels, q, k, v leaves of
// (B, T, heads * head_dim), causal; one step = forward and backward with the upstream dO.
struct FlashTensors {
  Tensor<float> q, k, v;
  Array<float> dO;
  AttentionSpec spec;
  FlashTensors(const bench::FlashShape& s, const bench::FlashInputs& in)
      : q(tensor_of<float>(in.q, {s.B, s.T, s.width()}, true)),
        k(tensor_of<float>(in.k, {s.B, s.T, s.width()}, true)),
        v(tensor_of<float>(in.v, {s.B, s.T, s.width()}, true)),
        dO(tensor_of<float>(in.dO, {s.B, s.T, s.width()}, false).value()) {
    spec = causal_spec(s.H);
    spec.head_dim = s.dh;
    apply_modifier(spec);
  }
  Tensor<float> step() {
    for (Tensor<float>* t : {&q, &k, &v}) t->zero_grad();
    Tensor<float> out = attention(q, k, v, spec, AttentionPath::flash).out;
    out.backward(dO);
    return out;
  }
};

Result run_flash(const Args& a, const bench::FlashShape& s) {
  const bench::FlashInputs in = bench::make_flash_inputs(s);
  FlashTensors t(s, in);
  Result r;
  if (!a.skip_check) {
    const Tensor<float> out = t.step();
    bench::check_flash<float>(s, in, values(out.value()), values(t.q.grad()), values(t.k.grad()),
                              values(t.v.grad()), r);
  }
  r.time_steps(a.warmup, a.repeats, [&] {
    t.step();
    g_sink = g_sink + double(t.q.grad()(0));
  });
  r.add("T", double(s.T));
  r.add("gflops", bench::flash_useful_flops(s) / (bench::median(r.samples_ms) * 1e6));
  return r;
}

// ------------------------------------------------------------ 1,000-op chain

Result run_chain(const Args& a) {
  const auto [xv, bv] = bench::make_chain_inputs();
  Tensor<float> x = tensor_of<float>(xv, {bench::kChainLen}, true);
  Tensor<float> b = tensor_of<float>(bv, {bench::kChainLen}, true);
  float loss = 0;
  auto step = [&] {
    x.zero_grad();
    b.zero_grad();
    Tensor<float> y = x;
    for (std::size_t i = 0; i < bench::kChainOps; ++i)
      y = i % 3 == 0 ? y * 0.9f : i % 3 == 1 ? y + b : tapegrad::tanh(y);
    Tensor<float> L = sum(y);
    L.backward();
    loss = L.item();
  };
  step();
  const bench::ChainReference ref = bench::naive_chain(xv, bv);
  Result r;
  const double e_loss = std::abs(loss - ref.loss) / std::abs(ref.loss);
  const double e_dx = bench::max_rel_error(values(x.grad()), ref.dx);
  const double e_db = bench::max_rel_error(values(b.grad()), ref.db);
  r.add("check_loss_rel_err", e_loss);
  r.add("check_grad_rel_err", std::max(e_dx, e_db));
  bench::require(e_loss < 1e-4 && e_dx < 1e-3 && e_db < 1e-3,
                 "chain loss/gradients differ from the naive loop");
  r.time_steps(a.warmup, a.repeats, step);
  return r;
}

// ------------------------------------------------------------ batched matmul in attention

// q, k (B, H, T, dh): scores = q @ k^T, B*H gemms of (T, dh) @ (dh, T). Timed three ways
// in the same loop: the differentiable op (matmul_nt, allocating its result), the raw
// batched kernel into a reused buffer, and one square sgemm of the same FLOPs.
Result run_bmm(const Args& a, const MhaShape& s) {
  const std::size_t BH = s.B * s.H, T = s.T, dh = s.D / s.H;
  bench::Rng rng(3);
  Tensor<float> q = tensor_of<float>(rng.normals(BH * T * dh, 1.0), {s.B, s.H, T, dh}, false);
  Tensor<float> k = tensor_of<float>(rng.normals(BH * T * dh, 1.0), {s.B, s.H, T, dh}, false);
  const std::size_t n = bench::same_flops_gemm_n(s);
  std::vector<float> A(n * n), Bm(n * n), C(n * n);
  // the kernel's output aligned as a tensor's storage is (and as libtorch's is): its
  // streaming stores need whole aligned vectors
  std::vector<float, TensorAllocator<float>> S(BH * T * T);
  for (auto& v : A) v = float(rng.normal());
  for (auto& v : Bm) v = float(rng.normal());
  kernels::GemmBatch batch;
  batch.M = T, batch.N = T, batch.K = dh, batch.trans_b = true;
  for (std::size_t i = 0; i < BH; ++i) {
    batch.a_offset.push_back(i * T * dh);
    batch.b_offset.push_back(i * T * dh);
    batch.c_offset.push_back(i * T * T);
  }

  // Check the op against a naive dot product at a few entries.
  Result r;
  {
    NoGradGuard no_grad;
    const Tensor<float> sc = matmul_nt(q, k);
    double err = 0;
    for (std::size_t e : {std::size_t(0), BH * T * T / 2 + 7, BH * T * T - 1}) {
      const std::size_t bh = e / (T * T), i = (e / T) % T, j = e % T;
      double want = 0;
      for (std::size_t d = 0; d < dh; ++d)
        want += double(q.data()[(bh * T + i) * dh + d]) * double(k.data()[(bh * T + j) * dh + d]);
      err = std::max(err, std::abs(sc.data()[e] - want) / (1 + std::abs(want)));
    }
    r.add("check_rel_err", err);
    bench::require(err < 1e-4, "matmul_nt differs from a naive dot product");
  }

  // The op (allocating its result), the batched kernel into a reused buffer and one square
  // sgemm of the same FLOPs, each timed alone.
  const auto wall = r.time_parts(
      a.warmup, a.repeats,
      {[&] {
         NoGradGuard no_grad;
         const Tensor<float> sc = matmul_nt(q, k);
         g_sink = g_sink + double(sc.data()[0]);
       },
       [&] {
         kernels::gemm_batch<float>(batch, 1.0f, q.data(), k.data(), 0.0f, S.data());
         g_sink = g_sink + double(S[0]);
       },
       [&] {
         kernels::gemm<float>(false, false, n, n, n, 1.0f, A.data(), Bm.data(), 0.0f, C.data());
         g_sink = g_sink + double(C[0]);
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
  const std::size_t n = bench::kGemmPeakN;
  bench::Rng rng(5);
  std::vector<R> A(n * n), B(n * n), C(n * n);
  for (auto& v : A) v = R(rng.normal());
  for (auto& v : B) v = R(rng.normal());
  Result r;
  kernels::gemm<R>(false, false, n, n, n, R(1), A.data(), B.data(), R(0), C.data());
  double want = 0;
  for (std::size_t k = 0; k < n; ++k) want += double(A[7 * n + k]) * double(B[k * n + 3]);
  const double err = std::abs(C[7 * n + 3] - want) / (1 + std::abs(want));
  r.add("check_rel_err", err);
  bench::require(err < 1e-3, "gemm differs from a naive dot product");
  r.time_steps(a.warmup, a.repeats, [&] {
    kernels::gemm<R>(false, false, n, n, n, R(1), A.data(), B.data(), R(0), C.data());
    g_sink = g_sink + double(C[0]);
  });
  r.add("gflops", 2.0 * double(n * n) * double(n) / (bench::median(r.samples_ms) * 1e6));
  return r;
}

double sgemm_peak_gflops(int repeats) {
  MatmulPrecisionGuard f32(MatmulPrecision::f32);  // a _bf16 step's ceiling is sgemm's too
  const std::size_t n = bench::kGemmPeakN;
  bench::Rng rng(5);
  std::vector<float> A(n * n), B(n * n), C(n * n);
  for (auto& v : A) v = float(rng.normal());
  for (auto& v : B) v = float(rng.normal());
  std::vector<double> ms;
  for (int i = 0; i <= repeats; ++i) {  // the first one warms up
    const double t0 = bench::now_ms();
    kernels::gemm<float>(false, false, n, n, n, 1.0f, A.data(), B.data(), 0.0f, C.data());
    if (i > 0) ms.push_back(bench::now_ms() - t0);
  }
  g_sink = g_sink + double(C[0]);
  return 2.0 * double(n * n) * double(n) / (bench::median(ms) * 1e6);
}

// ------------------------------------------------------------ the peers' reference

// An npz entry of `shape` holding v converted to R.
template <class R, class V>
NpzEntry entry(const std::string& name, const Shape& shape, const V& v) {
  xt::xarray<R> a = xt::xarray<R>::from_shape(shape);
  std::transform(v.begin(), v.end(), a.begin(), [](auto x) { return static_cast<R>(x); });
  return NpzEntry(name, std::move(a));
}

// The inputs of an MHA/GQA workload and tapegrad's output y (and gradients for <y, G>).
template <class R>
std::vector<NpzEntry> mha_reference(const bench::MhaWorkload& w) {
  const MhaShape& s = w.shape;
  const MhaInputs in = bench::make_mha_inputs(s);
  MhaTensors<R> t(in, s, w.backward);
  const Shape xs{s.B, s.T, s.D}, sq{s.D, s.D}, skv{s.D, s.kv_width()};
  std::vector<NpzEntry> e = {entry<R>("x", xs, in.x),   entry<R>("Wq", sq, in.Wq),
                             entry<R>("Wk", skv, in.Wk), entry<R>("Wv", skv, in.Wv),
                             entry<R>("Wo", sq, in.Wo),  entry<R>("G", xs, in.G)};
  Tensor<R> y = forward_of(t, s);
  e.push_back(entry<R>("y", xs, y.value()));
  if (!w.backward) return e;
  y.backward(tensor_of<R>(in.G, xs, false).value());
  e.push_back(entry<R>("dx", xs, t.x.grad()));
  e.push_back(entry<R>("dWq", sq, t.Wq.grad()));
  e.push_back(entry<R>("dWk", skv, t.Wk.grad()));
  e.push_back(entry<R>("dWv", skv, t.Wv.grad()));
  e.push_back(entry<R>("dWo", sq, t.Wo.grad()));
  return e;
}

// The batch (B, T+1), Transformer's initial parameters ("param.<name>", Linear weights (in, out)),
// and the first step's loss and gradients ("grad.<name>") on the whole batch.
// GPT-2 small: the parameters go to their own file, `weights_path`, written once (both GPT-2
// steps start from them) and summed into "param_sum"; each gradient is sampled
// ("grad_sample.<name>", bench::grad_sample_stride), so a reference is 15 MB, not 1 GB.
std::vector<NpzEntry> toygpt_reference(const bench::ToyGptShape& g, const std::string& weights_path) {
  Transformer<float> model(toygpt_config(g));
  const std::vector<std::int64_t> seq = bench::toygpt_tokens(g);
  std::vector<NpzEntry> e = {entry<std::int64_t>("tokens", {g.batch, g.T() + 1}, seq)};
  std::vector<NpzEntry> weights;
  double sum = 0;
  for (const auto& p : model.named_parameters()) {
    (g.hf_gpt2 ? weights : e).push_back(entry<float>("param." + p.name, p.tensor.shape(), p.tensor.value()));
    for (float v : p.tensor.value()) sum += double(v);
  }
  if (g.hf_gpt2) {
    e.push_back(entry<double>("param_sum", {}, std::vector<double>{sum}));
    if (!std::ifstream(weights_path)) save_npz(weights_path, weights);
    weights.clear();
  }
  const auto [tokens, targets] = next_token_batch(seq, g.batch, g.T());
  Tensor<float> loss = model.loss(tokens, targets);
  loss.backward();
  e.push_back(entry<double>("loss", {}, std::vector<double>{double(loss.item())}));
  for (const auto& p : model.named_parameters()) {
    if (!g.hf_gpt2) {
      e.push_back(entry<float>("grad." + p.name, p.tensor.shape(), p.tensor.grad()));
      continue;
    }
    const Array<float>& grad = p.tensor.grad();
    const std::size_t stride = bench::grad_sample_stride(grad.size());
    std::vector<float> sample;
    for (std::size_t i = 0; i < grad.size(); i += stride) sample.push_back(grad.data()[i]);
    e.push_back(entry<float>("grad_sample." + p.name, {sample.size()}, sample));
  }
  return e;
}

// One entry per parameter, "<prefix><name>", for each of the llama weights in `sets`.
void add_llama_weights(std::vector<NpzEntry>& e, const std::vector<bench::LlamaParam>& ps,
                       const std::vector<std::pair<std::string, const bench::LlamaWeights*>>& sets) {
  for (std::size_t i = 0; i < ps.size(); ++i) {
    const Shape shape(ps[i].shape.begin(), ps[i].shape.end());
    for (const auto& [prefix, weights] : sets)
      e.push_back(entry<float>(prefix + ps[i].name, shape, (*weights)[i]));
  }
}

// The batch, the timed weights ("train.<name>"), the check weights ("check.<name>") and
// tapegrad's loss and gradients at the check weights on the first two sequences.
std::vector<NpzEntry> llama_reference() {
  const bench::LlamaShape g;
  const std::vector<bench::LlamaParam> ps = bench::llama_parameters(g);
  const bench::LlamaWeights train = bench::llama_train_weights(g, ps), check = bench::llama_check_weights(ps);
  const std::vector<std::int64_t> seq = bench::toygpt_tokens(g);
  std::vector<NpzEntry> e = {entry<std::int64_t>("tokens", {g.batch, g.context + 1}, seq)};
  const auto [loss, grads] = llama_loss_and_grads(g, check, seq, 2);
  e.push_back(entry<double>("check_loss", {}, std::vector<double>{loss}));
  add_llama_weights(e, ps, {{"train.", &train}, {"check.", &check}, {"check_grad.", &grads}});
  return e;
}

// The prompt and its next token (tokens, context of them), the timed weights
// ("train.<name>"), the check weights ("check.<name>") and tapegrad's logits of one cached
// step after the prompt at the check weights ("check_logits", vocab).
std::vector<NpzEntry> decode_reference(std::size_t context) {
  const bench::LlamaShape g = bench::decode_shape(context);
  const std::vector<bench::LlamaParam> ps = bench::llama_parameters(g);
  const bench::LlamaWeights train = bench::llama_train_weights(g, ps), check = bench::llama_check_weights(ps);
  const std::vector<std::int64_t> tokens = bench::decode_tokens(g);
  std::vector<NpzEntry> e = {entry<std::int64_t>("tokens", {g.context}, tokens),
                             entry<double>("check_logits", {g.vocab}, decode_logits(g, check, tokens))};
  add_llama_weights(e, ps, {{"train.", &train}, {"check.", &check}});
  return e;
}

// The batch, the timed weights ("train.<name>", run_moe's initial model), the check weights
// ("check.<name>") and, at those on the first two sequences, tapegrad's training loss
// ("check_loss": LM + aux + z, with each part beside it) and its gradients.
std::vector<NpzEntry> moe_reference() {
  const bench::LlamaShape g;
  const std::vector<std::int64_t> seq = bench::toygpt_tokens(g);
  std::vector<NpzEntry> e = {entry<std::int64_t>("tokens", {g.batch, g.context + 1}, seq)};
  Transformer<float> train(moe_config(g)), check(moe_config(g));
  set_check_weights(check);
  const auto [tokens, targets] = next_token_batch(seq, 2, g.context);
  const TrainingLoss<float> loss = check.training_loss(tokens, targets);
  loss.total.backward();
  const std::pair<const char*, const Tensor<float>*> parts[] = {
      {"check_loss", &loss.total}, {"check_lm_loss", &loss.lm}, {"check_aux_loss", &loss.aux},
      {"check_z_loss", &loss.z}};
  for (const auto& [key, part] : parts)
    e.push_back(entry<double>(key, {}, std::vector<double>{double(part->item())}));
  for (const auto& p : train.named_parameters())
    e.push_back(entry<float>("train." + p.name, p.tensor.shape(), p.tensor.value()));
  for (const auto& p : check.named_parameters()) {
    e.push_back(entry<float>("check." + p.name, p.tensor.shape(), p.tensor.value()));
    e.push_back(entry<float>("check_grad." + p.name, p.tensor.shape(), p.tensor.grad()));
  }
  return e;
}

// q, k, v, dO and tapegrad's flash output and gradients.
std::vector<NpzEntry> flash_reference(const bench::FlashShape& s) {
  const bench::FlashInputs in = bench::make_flash_inputs(s);
  FlashTensors t(s, in);
  const Tensor<float> out = t.step();
  const Shape xs{s.B, s.T, s.width()};
  return {entry<float>("q", xs, in.q),          entry<float>("k", xs, in.k),
          entry<float>("v", xs, in.v),          entry<float>("dO", xs, in.dO),
          entry<float>("out", xs, out.value()), entry<float>("dq", xs, t.q.grad()),
          entry<float>("dk", xs, t.k.grad()),   entry<float>("dv", xs, t.v.grad())};
}

// The reference of a.workload written to a.dump; false for a workload the peers do not run.
bool dump_reference(const Args& a) {
  bench::MhaWorkload w;
  std::vector<NpzEntry> e;
  if (bench::parse_mha(a.workload, w) || bench::parse_gqa(a.workload, w))
    e = w.is_double ? mha_reference<double>(w) : mha_reference<float>(w);
  else if (a.workload == "toygpt_step")
    e = toygpt_reference(bench::ToyGptShape{}, "");
  else if (const bench::ToyGptShape g = bench::parse_gpt2(a.workload); g.batch != 0)
    e = toygpt_reference(g, (std::filesystem::path(a.dump).parent_path() / bench::kGpt2WeightsFile).string());
  else if (a.workload == "llama_step")
    e = llama_reference();
  else if (a.workload == "moe_step")
    e = moe_reference();
  else if (const bench::FlashShape fs = bench::parse_flash(a.workload); fs.T != 0)
    e = flash_reference(fs);
  else if (const std::size_t context = bench::parse_decode(a.workload))
    e = decode_reference(context);
  else
    return false;
  save_npz(a.dump, e);
  return true;
}

// "toygpt_step_bf16" -> "toygpt_step" (likewise every bench::kBf16Workloads); "" otherwise.
std::string bf16_base(const std::string& workload) {
  for (const char* base : bench::kBf16Workloads)
    if (workload == std::string(base) + "_bf16") return base;
  return "";
}

void print_info() {
  auto env = [](const char* k) {
    const char* v = std::getenv(k);
    return std::string(v ? v : "(unset)");
  };
  nlohmann::ordered_json info;
  info["framework"] = "tapegrad";
  info["openblas_config"] = openblas_get_config();
  info["openblas_corename"] = openblas_get_corename();
  info["openblas_threads"] = openblas_get_num_threads();
  info["OPENBLAS_CORETYPE"] = env("OPENBLAS_CORETYPE");
  info["OPENBLAS_L2_SIZE"] = env("OPENBLAS_L2_SIZE");
  info["compiler"] = std::string("g++ ") + __VERSION__;
  std::printf("%s\n", info.dump().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const long start_rss = bench::peak_rss_kb();
  Args a = bench::parse_args(argc, argv);
  const std::string workload_name = a.workload;  // as asked: a _bf16 step runs its base step
  if (a.list) {
    for (const auto& w : bench::workload_names()) std::printf("%s\n", w.c_str());
    return 0;
  }
  kernels::set_num_threads(a.threads);
  // W_bf16: workload W (a training step, flash fwd+bwd, a decode step) with its float32
  // matrix products in bf16 (ops/precision.hpp), from W's reference. Its start-up check is W's in float32 (bf16's rounding is far outside
  // the check's 1e-4), so a bf16 run skips it.
  // W_alibi, W_softcap: W with the modifier on every attention; no reference has it, so
  // such a run skips the start-up check too.
  take_modifier(a.workload);
  if (a.workload == "decode_ctx1024_kvbf16") {
    a.workload = "decode_ctx1024";
    g_kv_dtype = KVDtype::bf16;
  }
  if (a.workload == bench::kGpt2CheckpointedStep) {
    a.workload = bench::gpt2_name(4, 1024);
    g_checkpoint_blocks = true;
  }
  if (g_modifier != Modifier::none) a.skip_check = true;
  std::optional<MatmulPrecisionGuard> bf16;
  if (const std::string step = bf16_base(a.workload); !step.empty()) {
    a.workload = step;
    a.skip_check = true;
    bf16.emplace(MatmulPrecision::bf16);
  }
  if (a.info) {
    print_info();
    return 0;
  }
  if (!a.dump.empty()) {
    if (dump_reference(a)) return 0;
    std::fprintf(stderr, "tapegrad_bench: --dump: no reference for workload %s\n", a.workload.c_str());
    return 2;
  }
  Result r;
  bench::MhaWorkload mha;
  if (bench::parse_mha(a.workload, mha)) {
    r = mha.is_double ? run_mha<double>(a, mha) : run_mha<float>(a, mha);
  } else if (bench::parse_gqa(a.workload, mha)) {
    r = run_gqa(a, mha);
  } else if (a.workload == "toygpt_step") {
    r = run_toygpt(a, bench::ToyGptShape{});
  } else if (const bench::ToyGptShape g = bench::parse_gpt2(a.workload); g.batch != 0) {
    r = run_toygpt(a, g);
  } else if (a.workload == "llama_step") {
    r = run_llama(a);
  } else if (a.workload == "moe_step") {
    r = run_moe(a);
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
    std::fprintf(stderr, "tapegrad_bench: unknown workload %s (--list names them)\n", a.workload.c_str());
    return 4;
  }
  r.add("blas_threads", openblas_get_num_threads());
  a.workload = workload_name;
  bench::print_json("tapegrad", a, r, start_rss);
  return 0;
}
