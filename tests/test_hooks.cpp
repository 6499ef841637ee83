// Hook points (nn/hooks.hpp): every documented name with its documented shape on the gpt2,
// llama and mixtral presets and an attention-only model; a cached run computes what a plain one does, bit for bit;
// zeroing one head's z equals the head mask's ablation; patching with a run's own cache is
// the identity, and patching a whole residual stream from another run gives that run's
// logits; a hook on the scores reaches the softmax (zero scores give uniform attention
// over the visible keys); gradients at a hooked activation agree with finite differences;
// unknown names and wrong shapes are errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "nn/config.hpp"
#include "nn/hooks.hpp"
#include "nn/interpret.hpp"
#include "nn/transformer.hpp"
#include "ops/elementwise.hpp"
#include "ops/reduce.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

namespace {

TransformerConfig small(TransformerConfig c) {
  c.vocab = 9;
  c.context = 6;
  c.d_model = 8;
  c.heads = 2;
  c.layers = 2;
  c.mlp_hidden = 12;
  c.seed = 3;
  return c;
}

TransformerConfig small_llama() {
  TransformerConfig c = small(llama_preset());
  c.heads = 4;
  c.kv_heads = 2;  // grouped: k and v have fewer heads than q
  return c;
}

TransformerConfig attention_only() {
  TransformerConfig c = small(gpt2_preset());
  c.mlp = MlpKind::none;
  return c;
}

// gemma2 (post norms, window on layer 0) and bloom (the embeddings' norm), as finished
TransformerConfig small_preset(const std::string& name) {
  TransformerConfig c = small(preset(name));
  finish_preset(name, c);
  return c;
}

TransformerConfig small_mixtral() {
  TransformerConfig c = small(mixtral_preset());
  c.experts = 3;
  c.experts_top_k = 2;
  return c;
}

// The documented table (docs/HOOKS.md), written out for config c and tokens (B, T).
std::map<std::string, Shape> documented_shapes(const TransformerConfig& c, std::size_t B,
                                               std::size_t T) {
  const std::size_t D = c.d_model, H = c.heads, KV = c.resolved_kv_heads(),
                    dh = c.resolved_head_dim();
  std::map<std::string, Shape> s{{"embed", {B, T, D}}, {"ln_final.out", {B, T, D}},
                                 {"logits", {B, T, c.vocab}}};
  if (c.positions == PositionKind::learned) s["pos_embed"] = {T, D};
  if (c.embed_norm) s["ln_embed.out"] = {B, T, D};
  for (std::size_t l = 0; l < c.layers; ++l) {
    const std::string p = "blocks." + std::to_string(l) + ".";
    for (const char* name : {"resid_pre", "ln1.out", "attn_out", "resid_mid", "resid_post"})
      s[p + name] = {B, T, D};
    s[p + "attn.q"] = {B, T, H, dh};
    s[p + "attn.k"] = {B, T, KV, dh};
    s[p + "attn.v"] = {B, T, KV, dh};
    s[p + "attn.z"] = {B, T, H, dh};
    s[p + "attn.scores"] = {B, H, T, T};
    s[p + "attn.pattern"] = {B, H, T, T};
    if (c.post_norms) s[p + "ln1_post.out"] = {B, T, D};
    if (c.mlp == MlpKind::none) continue;  // attention-only: no second norm, no feed-forward
    s[p + "ln2.out"] = s[p + "mlp_out"] = {B, T, D};
    if (c.post_norms) s[p + "ln2_post.out"] = {B, T, D};
    if (c.is_moe_layer(l)) {
      s[p + "moe.router_logits"] = {B * T, c.experts};
      s[p + "moe.choices"] = {B * T, c.experts_top_k};
      s[p + "moe.hook_weights"] = {B * T, c.experts_top_k};
    } else {
      s[p + "mlp.hidden"] = {B, T, c.resolved_mlp_hidden()};
    }
  }
  return s;
}

bool same_bits(const Array<float>& a, const Array<float>& b) {
  if (a.shape() != b.shape()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a.data()[i] != b.data()[i]) return false;
  return true;
}

}  // namespace

TEST_CASE("hooks: every documented point with its shape, on gpt2, llama, mixtral, gemma2 and bloom",
          "[hooks]") {
  TransformerConfig gemma_attention_only = small_preset("gemma2");
  gemma_attention_only.mlp = MlpKind::none;
  const std::vector<std::pair<const char*, TransformerConfig>> presets = {
      {"gpt2", small(gpt2_preset())}, {"llama", small_llama()}, {"mixtral", small_mixtral()},
      {"attention-only", attention_only()}, {"gemma2", small_preset("gemma2")},
      {"bloom", small_preset("bloom")}, {"gemma2 attention-only", gemma_attention_only}};
  for (const auto& [preset_name, c] : presets) {
    INFO("preset " << preset_name);
    Transformer<float> model(c);
    const CachedRun<float> run = run_with_cache(model, random_tokens(2, 5, c.vocab, 1));
    const std::map<std::string, Shape> expected = documented_shapes(c, 2, 5);
    CHECK(run.cache.size() == expected.size());
    for (const auto& [name, shape] : expected) {
      INFO(name);
      REQUIRE(run.cache.contains(name));
      CHECK(run.cache[name].shape() == shape);
    }
  }
}

TEST_CASE("hooks: a cached run's logits are the plain forward's, bit for bit", "[hooks]") {
  for (const TransformerConfig& c : {small(gpt2_preset()), small_llama(), small_mixtral(),
                                     small_preset("gemma2"), small_preset("bloom")}) {
    Transformer<float> model(c);
    const Indices tokens = random_tokens(2, 6, c.vocab, 2);
    const Tensor<float> plain = model.forward(tokens);
    const CachedRun<float> run = run_with_cache(model, tokens);
    CHECK(same_bits(run.logits.value(), plain.value()));
    // the cached pattern is the weights the model used: rows sum to 1, zero above the diagonal
    const Array<float>& w = run.cache["blocks.1.attn.pattern"].value();
    for (std::size_t r = 0; r < 2 * c.heads * 6; ++r) {
      const std::size_t i = r % 6;
      float total = 0;
      for (std::size_t j = 0; j < 6; ++j) {
        total += w.data()[r * 6 + j];
        if (j > i) CHECK(w.data()[r * 6 + j] == 0.0f);
      }
      CHECK(total == Approx(1.0f).epsilon(1e-5));
    }
    // and the model is left without hooks
    CHECK(same_bits(model.forward(tokens).value(), plain.value()));
  }
}

TEST_CASE("hooks: gemma2's post norms and bloom's embedding norm are what the stream adds and "
          "reads", "[hooks]") {
  // gemma2: embed = tok_emb rows * sqrt(D); resid_mid = resid_pre + ln1_post.out (not
  // attn_out), resid_post = resid_mid + ln2_post.out (not mlp_out)
  Transformer<double> gemma(small_preset("gemma2"));
  const Indices tokens = random_tokens(2, 6, 9, 3);
  const CachedRun<double> g = run_with_cache(gemma, tokens);
  const Array<double>& emb = gemma.parameter("tok_emb.weight").value();
  const double root_d = std::sqrt(8.0);
  for (std::size_t d = 0; d < 8; ++d)
    CHECK(g.cache["embed"].value()(1, 2, d) == Approx(emb(tokens(1, 2), d) * root_d).epsilon(1e-15));
  for (std::size_t l = 0; l < 2; ++l) {
    const std::string p = "blocks." + std::to_string(l) + ".";
    const auto at = [&](const char* name) { return Array<double>(g.cache[p + name].value()); };
    check_close<double>(at("resid_mid"), Array<double>(at("resid_pre") + at("ln1_post.out")), 1e-14);
    check_close<double>(at("resid_post"), Array<double>(at("resid_mid") + at("ln2_post.out")), 1e-14);
    CHECK(xt::amax(xt::abs(at("attn_out") - at("ln1_post.out")))() > 1e-3);
  }
  // bloom: the first block reads the normalised embeddings, each row of mean 0
  Transformer<double> bloom(small_preset("bloom"));
  const CachedRun<double> b = run_with_cache(bloom, tokens);
  const Array<double>& normed = b.cache["ln_embed.out"].value();
  check_close<double>(b.cache["blocks.0.resid_pre"].value(), normed, 0.0);
  for (std::size_t r = 0; r < 12; ++r) {
    double row_sum = 0;
    for (std::size_t d = 0; d < 8; ++d) row_sum += normed.data()[r * 8 + d];
    CHECK(row_sum == Approx(0.0).margin(1e-12));
  }
}

TEST_CASE("hooks: zeroing one head's z equals the head mask's ablation", "[hooks]") {
  Transformer<float> model(small_llama());
  const Indices tokens = random_tokens(2, 6, 9, 4);
  const Tensor<float> plain = model.forward(tokens);
  model.ablate_head(1, 2);
  const Tensor<float> masked = model.forward(tokens);
  model.clear_head_masks();
  REQUIRE_FALSE(same_bits(masked.value(), plain.value()));  // the head matters

  Hooks<float> hooks;
  hooks.add("blocks.1.attn.z", [](const Tensor<float>& z, const std::string&) {
    Array<float> zeroed = z.value();  // (B, T, H, dh): head 2 of every position
    const std::size_t H = z.shape()[2], dh = z.shape()[3];
    for (std::size_t row = 0; row < z.size() / (H * dh); ++row)
      for (std::size_t e = 0; e < dh; ++e) zeroed.data()[(row * H + 2) * dh + e] = 0;
    return Tensor<float>(std::move(zeroed));
  });
  CHECK(same_bits(model.run_with_hooks(tokens, hooks).value(), masked.value()));
}

TEST_CASE("hooks: the kept routing weights are each token's renormalised top k, and zeroing "
          "them zeroes the experts' output", "[hooks][moe]") {
  Transformer<float> model(small_mixtral());
  const Indices tokens = random_tokens(2, 5, 9, 8);
  const CachedRun<float> run = run_with_cache(model, tokens);
  const Array<float>& w = run.cache["blocks.1.moe.hook_weights"].value();  // (B*T, k)
  const Array<float>& logits = run.cache["blocks.1.moe.router_logits"].value();
  const Array<float>& choices = run.cache["blocks.1.moe.choices"].value();
  for (std::size_t t = 0; t < 10; ++t) {
    // renormalised: p_j / (p_0 + p_1) = 1 / (1 + exp(l_other - l_j)) for k = 2
    const float l0 = logits(t, std::size_t(choices(t, 0))), l1 = logits(t, std::size_t(choices(t, 1)));
    CHECK(w(t, 0) == Approx(1 / (1 + std::exp(l1 - l0))).epsilon(1e-5));
    CHECK(w(t, 1) == Approx(1 / (1 + std::exp(l0 - l1))).epsilon(1e-5));
  }

  Hooks<float> hooks;
  hooks.add("blocks.1.moe.hook_weights", [](const Tensor<float>& weights, const std::string&) {
    return Tensor<float>::zeros(weights.shape());
  });
  hooks.cache({"blocks.1.resid_mid", "blocks.1.resid_post"});
  const Tensor<float> patched = model.run_with_hooks(tokens, hooks);
  const ActivationCache<float>& cache = hooks.activations();
  CHECK(same_bits(cache["blocks.1.resid_post"].value(), cache["blocks.1.resid_mid"].value()));
  CHECK_FALSE(same_bits(patched.value(), run.logits.value()));
}

TEST_CASE("hooks: patching with the run's own cache is the identity, with another run's, "
          "that run", "[hooks]") {
  Transformer<float> model(small(gpt2_preset()));
  const Indices clean = random_tokens(1, 6, 9, 5), corrupt = random_tokens(1, 6, 9, 6);
  const CachedRun<float> clean_run = run_with_cache(model, clean);
  const Tensor<float> corrupt_logits = model.forward(corrupt);
  REQUIRE_FALSE(same_bits(clean_run.logits.value(), corrupt_logits.value()));

  auto patch_from = [&](const std::string& name) {
    Hooks<float> hooks;
    hooks.add(name, [&](const Tensor<float>&, const std::string& at) { return clean_run.cache[at]; });
    return hooks;
  };
  Hooks<float> own = patch_from("blocks.1.resid_mid");
  CHECK(same_bits(model.run_with_hooks(clean, own).value(), clean_run.logits.value()));
  // the whole residual stream entering layer 0 carries everything the tokens say
  Hooks<float> whole = patch_from("blocks.0.resid_pre");
  CHECK(same_bits(model.run_with_hooks(corrupt, whole).value(), clean_run.logits.value()));
  // one head's pattern is not everything: the patched run is neither of the two
  Hooks<float> pattern = patch_from("blocks.0.attn.pattern");
  const Tensor<float> partly = model.run_with_hooks(corrupt, pattern);
  CHECK_FALSE(same_bits(partly.value(), clean_run.logits.value()));
  CHECK_FALSE(same_bits(partly.value(), corrupt_logits.value()));
}

TEST_CASE("hooks: a function on the scores reaches the softmax, under the causal mask", "[hooks]") {
  Transformer<double> model(small(gpt2_preset()));
  Hooks<double> hooks;
  hooks.add("blocks.0.attn.scores", [](const Tensor<double>& s, const std::string&) {
    // the masked scores arrive as -inf above the diagonal
    for (std::size_t r = 0; r < s.size() / 36; ++r)
      for (std::size_t i = 0; i < 6; ++i)
        for (std::size_t j = i + 1; j < 6; ++j) CHECK(std::isinf(s.value().data()[r * 36 + i * 6 + j]));
    return s * 0.0;  // every score 0 (and -inf * 0 = NaN above the diagonal: still hidden)
  });
  hooks.cache({"blocks.0.attn.pattern"});
  model.run_with_hooks(random_tokens(1, 6, 9, 7), hooks);
  // uniform over the visible keys: query i gives each of its i + 1 keys 1 / (i + 1)
  const Array<double>& w = hooks.activations()["blocks.0.attn.pattern"].value();
  for (std::size_t h = 0; h < 2; ++h)
    for (std::size_t i = 0; i < 6; ++i)
      for (std::size_t j = 0; j < 6; ++j)
        CHECK(w.data()[(h * 6 + i) * 6 + j] == Approx(j <= i ? 1.0 / double(i + 1) : 0.0));
}

TEST_CASE("hooks: gradients at hooked activations agree with finite differences", "[hooks][gradcheck]") {
  Transformer<double> model(small_llama());
  const Indices tokens = random_tokens(1, 5, 9, 8);
  const Tensor<double> weights = random<double>({1, 5, 9}, 9, false);
  const std::vector<std::string> names = {"blocks.0.attn.scores", "blocks.1.attn.pattern",
                                          "blocks.0.attn.q", "blocks.1.mlp.hidden",
                                          "blocks.1.resid_mid"};
  CachedRun<double> run = run_with_cache(model, tokens, names, true);
  sum(run.logits * weights).backward();
  // the objective with `name`'s entry `i` moved by `delta`
  auto objective = [&](const std::string& name, std::size_t i, double delta) {
    Hooks<double> hooks;
    hooks.add(name, [&](const Tensor<double>& x, const std::string&) {
      Array<double> moved = x.value();
      moved.data()[i] += delta;
      return Tensor<double>(std::move(moved));
    });
    NoGradGuard no_grad;
    return sum(model.run_with_hooks(tokens, hooks) * weights).item();
  };
  for (const std::string& name : names) {
    const Tensor<double>& x = run.cache[name];
    const Array<double>& g = run.cache.grad(name);
    REQUIRE(g.shape() == x.value().shape());
    for (std::size_t i = 0; i < x.size(); i += 7) {
      if (std::isinf(x.value().data()[i])) continue;  // a hidden score: no derivative
      const double h = 1e-6;
      const double numeric = (objective(name, i, h) - objective(name, i, -h)) / (2 * h);
      INFO(name << "[" << i << "]");
      CHECK(g.data()[i] == Approx(numeric).margin(1e-7).epsilon(1e-6));
    }
  }
}

TEST_CASE("hooks: an unknown name, a wrong shape and a changed choice are errors", "[hooks]") {
  Transformer<float> model(small(gpt2_preset()));
  const Indices tokens = random_tokens(1, 4, 9, 9);
  Hooks<float> typo;
  typo.cache({"blocks.0.atn.q"});
  CHECK_THROWS_WITH(model.run_with_hooks(tokens, typo),
                    Catch::Contains("no hook point named 'blocks.0.atn.q'") &&
                        Catch::Contains("blocks.0.attn.q"));
  Hooks<float> missing_layer;
  missing_layer.add("blocks.2.resid_pre", [](const Tensor<float>& x, const std::string&) { return x; });
  CHECK_THROWS_WITH(model.run_with_hooks(tokens, missing_layer), Catch::Contains("blocks.2.resid_pre"));
  Hooks<float> wrong;
  wrong.add("blocks.0.attn_out", [](const Tensor<float>&, const std::string&) {
    return Tensor<float>::zeros({1, 4, 3});
  });
  CHECK_THROWS_WITH(model.run_with_hooks(tokens, wrong),
                    Catch::Contains("blocks.0.attn_out") && Catch::Contains("(1,4,3)") &&
                        Catch::Contains("(1,4,8)"));
  // after a failed run the model has no hooks left
  CHECK(same_bits(model.forward(tokens).value(), model.forward(tokens).value()));
  CHECK_THROWS_WITH(run_with_cache(model, tokens, {"blocks.0.moe.choices"}),
                    Catch::Contains("no hook point named 'blocks.0.moe.choices'"));

  Transformer<float> moe(small_mixtral());
  Hooks<float> change;
  change.add("blocks.0.moe.choices", [](const Tensor<float>& x, const std::string&) { return x; });
  CHECK_THROWS_WITH(moe.run_with_hooks(tokens, change), Catch::Contains("can be cached, not changed"));
  CHECK_THROWS_WITH(run_with_cache(moe, tokens, {"logits"}).cache.grad("logits"),
                    Catch::Contains("without gradients"));
}

TEST_CASE("interpret: zero_head is the head mask's ablation, mean_head the slice's mean",
          "[hooks][interpret]") {
  Transformer<float> model(small_llama());
  const Indices tokens = random_tokens(2, 6, 9, 11);
  model.ablate_head(0, 1);
  const Tensor<float> masked = model.forward(tokens);
  model.clear_head_masks();
  Hooks<float> zero;
  zero.add("blocks.0.attn.z", zero_head<float>(1));
  CHECK(same_bits(model.run_with_hooks(tokens, zero).value(), masked.value()));

  const Tensor<float> z = random<float>({2, 3, 4, 2}, 12, false);  // (B, T, heads, dh)
  const Array<float> m = mean_head<float>(2)(z, "z").value();
  for (std::size_t e = 0; e < 2; ++e) {
    double mean = 0;
    for (std::size_t row = 0; row < 6; ++row) mean += z.value().data()[(row * 4 + 2) * 2 + e] / 6.0;
    for (std::size_t row = 0; row < 6; ++row) {
      CHECK(m.data()[(row * 4 + 2) * 2 + e] == Approx(mean));
      CHECK(m.data()[(row * 4 + 1) * 2 + e] == z.value().data()[(row * 4 + 1) * 2 + e]);
    }
  }
  CHECK_THROWS_WITH(zero_head<float>(4)(z, "z"), Catch::Contains("head 4") && Catch::Contains("(2,3,4,2)"));
}

TEST_CASE("interpret: patching the residual stream where the runs differ restores the clean "
          "run, elsewhere changes nothing", "[hooks][interpret]") {
  Transformer<double> model(small(gpt2_preset()));
  Indices clean = random_tokens(1, 6, 9, 13);
  Indices corrupted = clean;
  corrupted(0, 2) = (clean(0, 2) + 1) % 9;  // one token differs, at position 2
  const LogitMetric<double> last_logit = [](const Tensor<double>& logits) {
    return logits.value().data()[logits.size() - 1];
  };
  const double clean_metric = last_logit(model.forward(clean));
  const double corrupted_metric = last_logit(model.forward(corrupted));
  REQUIRE(clean_metric != corrupted_metric);
  const auto grid = patch_residual_by_position(model, clean, corrupted, last_logit);
  REQUIRE(grid.size() == 2);
  REQUIRE(grid[0].size() == 6);
  // at layer 0 the stream holds only the tokens (and positions): position 2 is all that differs
  CHECK(grid[0][2] == Approx(clean_metric).epsilon(1e-12));
  for (std::size_t p : {0, 1, 3, 4, 5}) CHECK(grid[0][p] == Approx(corrupted_metric).epsilon(1e-12));
  // at layer 1, positions before 2 never saw the difference (causal): patching them is a no-op
  CHECK(grid[1][0] == Approx(corrupted_metric).epsilon(1e-12));
  CHECK(grid[1][1] == Approx(corrupted_metric).epsilon(1e-12));

  const auto heads = patch_heads(model, clean, corrupted, last_logit);
  REQUIRE(heads.size() == 2);
  REQUIRE(heads[0].size() == 2);
  bool some_head_matters = false;
  for (const auto& layer : heads)
    for (double v : layer) some_head_matters |= std::abs(v - corrupted_metric) > 1e-9;
  CHECK(some_head_matters);
  // patched from an identical run, every head leaves the run as it was
  for (const auto& layer : patch_heads(model, clean, clean, last_logit))
    for (double v : layer) CHECK(v == Approx(clean_metric).epsilon(1e-12));
  CHECK_THROWS_WITH(patch_heads(model, clean, random_tokens(1, 5, 9, 1), last_logit),
                    Catch::Contains("one shape"));
}

namespace {

// Random values in every 1-D parameter (gains, biases), so that the final norm's gain and
// bias take part in the attribution rather than being 1 and 0.
void randomise_vectors(Transformer<double>& model) {
  std::uint64_t seed = 40;
  for (const auto& p : model.named_parameters()) {
    if (p.tensor.dim() != 1) continue;
    Tensor<double> t = p.tensor;
    const Tensor<double> r = random<double>(t.shape(), seed++, false);
    std::copy(r.value().begin(), r.value().end(), t.value().begin());
  }
}

// Mean over the counted positions of the model's own logit of the target.
double mean_target_logit(Transformer<double>& model, const Indices& tokens, const Indices& targets) {
  const Array<double> logits = model.forward(tokens).value();
  const std::size_t V = model.config().vocab;
  double sum = 0;
  std::size_t n = 0;
  for (std::size_t i = 0; i < targets.size(); ++i)
    if (targets.data()[i] != -100) {
      sum += logits.data()[i * V + std::size_t(targets.data()[i])];
      ++n;
    }
  return sum / double(n);
}

double total(const LogitAttribution& a) {
  double s = std::abs(a.embed) + std::abs(a.logit);
  for (const auto& layer : a.heads)
    for (double v : layer) s += std::abs(v);
  return s;
}

}  // namespace

TEST_CASE("interpret: direct logit attribution of an attention-only RMSNorm model adds up to "
          "its target logits", "[hooks][interpret]") {
  TransformerConfig c = small_llama();
  c.mlp = MlpKind::none;
  Transformer<double> model(c);
  randomise_vectors(model);
  const Indices tokens = random_tokens(2, 6, c.vocab, 21);
  Indices targets = random_tokens(2, 6, c.vocab, 22);
  targets(1, 3) = -100;  // not counted
  LogitAttribution a = direct_logit_attribution(model, tokens, targets);
  REQUIRE(a.heads.size() == 2);
  REQUIRE(a.heads[0].size() == 4);
  CHECK(a.logit == Approx(mean_target_logit(model, tokens, targets)).epsilon(1e-12));
  // nothing but the embedding and the heads wrote into the stream: the shares are the logit
  CHECK(std::abs(a.rest) < 1e-12 * total(a));
  CHECK(std::abs(a.heads[1][2]) > 1e-6);

  // a head whose rows of Wo are zero writes nothing, and the rest still adds up
  Tensor<double> Wo = model.parameter("blocks.1.attn.Wo");
  const std::size_t dh = c.d_model / c.heads;
  for (std::size_t e = 0; e < dh; ++e)
    for (std::size_t d = 0; d < c.d_model; ++d) Wo.value()(2 * dh + e, d) = 0.0;
  a = direct_logit_attribution(model, tokens, targets);
  CHECK(a.heads[1][2] == 0.0);
  CHECK(std::abs(a.heads[1][1]) > 1e-6);
  CHECK(std::abs(a.rest) < 1e-12 * total(a));

  // a head silenced by the mask gets 0 and the sum still holds
  model.set_head_mask(0, {true, false, true, true});
  a = direct_logit_attribution(model, tokens, targets);
  CHECK(a.heads[0][1] == 0.0);
  CHECK(std::abs(a.rest) < 1e-12 * total(a));
}

TEST_CASE("interpret: direct logit attribution reads a gemma gain as 1 + w and starts the "
          "stream at the embeddings' norm", "[hooks][interpret]") {
  TransformerConfig c = small_llama();
  c.mlp = MlpKind::none;
  c.norm = NormKind::gemma;
  c.embed_norm = true;
  c.embed_scale = true;
  Transformer<double> model(c);
  randomise_vectors(model);
  const Indices tokens = random_tokens(2, 6, c.vocab, 31), targets = random_tokens(2, 6, c.vocab, 32);
  const LogitAttribution a = direct_logit_attribution(model, tokens, targets);
  CHECK(a.logit == Approx(mean_target_logit(model, tokens, targets)).epsilon(1e-12));
  CHECK(std::abs(a.rest) < 1e-12 * total(a));
  CHECK(std::abs(a.embed) > 1e-6);

  c.post_norms = true;  // a norm between each head and the stream: no linear share
  Transformer<double> sandwich(c);
  CHECK_THROWS_WITH(direct_logit_attribution(sandwich, tokens, targets),
                    Catch::Contains("direct_logit_attribution") && Catch::Contains("post_norms"));
}

TEST_CASE("interpret: under LayerNorm with learned positions the rest of the direct logit "
          "attribution is the final norm's bias", "[hooks][interpret]") {
  const TransformerConfig c = attention_only();  // gpt2: LayerNorm with a bias, learned positions
  Transformer<double> model(c);
  randomise_vectors(model);
  const Indices tokens = random_tokens(3, 5, c.vocab, 23), targets = random_tokens(3, 5, c.vocab, 24);
  const LogitAttribution a = direct_logit_attribution(model, tokens, targets);
  // the bias's share, from the parameters: mean over positions of <bias, W_U[:, y]>
  const Array<double>& bias = model.parameter("norm_f.bias").value();
  const bool tied = !model.has_parameter("head.weight");
  const Array<double>& W = model.parameter(tied ? "tok_emb.weight" : "head.weight").value();
  double want = 0;
  for (std::size_t i = 0; i < targets.size(); ++i) {
    const auto y = std::size_t(targets.data()[i]);
    for (std::size_t d = 0; d < c.d_model; ++d) want += bias(d) * (tied ? W(y, d) : W(d, y));
  }
  want /= double(targets.size());
  REQUIRE(std::abs(want) > 1e-3);
  CHECK(a.logit == Approx(mean_target_logit(model, tokens, targets)).epsilon(1e-12));
  CHECK(a.rest == Approx(want).epsilon(1e-10));
}

TEST_CASE("interpret: direct logit attribution names bad targets", "[hooks][interpret]") {
  Transformer<double> model(attention_only());
  const Indices tokens = random_tokens(1, 4, 9, 25);
  CHECK_THROWS_WITH(direct_logit_attribution(model, tokens, random_tokens(1, 3, 9, 26)),
                    Catch::Contains("direct_logit_attribution") && Catch::Contains("one shape"));
  Indices targets = random_tokens(1, 4, 9, 27);
  targets(0, 2) = 9;
  CHECK_THROWS_WITH(direct_logit_attribution(model, tokens, targets),
                    Catch::Contains("target 9") && Catch::Contains("vocab=9"));
  Indices ignored = Indices::from_shape({1, 4});
  ignored.fill(-100);  // a mean over no positions
  CHECK_THROWS_WITH(direct_logit_attribution(model, tokens, ignored),
                    Catch::Contains("direct_logit_attribution") && Catch::Contains("every target"));
}
