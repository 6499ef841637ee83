// The model workloads: a TOY-GPT or GPT-2 small training step, Llama's, the mixture of
// experts', and a cached decode step.
#include "shared.hpp"

#include <algorithm>
#include <cmath>

namespace tapegrad_bench {

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

}  // namespace tapegrad_bench
