// Mixture of experts: the configuration fields, the `mixtral` preset, their
// validation, the total/active parameter counts (Mixtral 8x7B's published totals and sums
// worked by hand, not the code's), the routing, gradcheck through the layer and its
// auxiliary losses, the dead router at k = 1 with renormalisation, the aux loss at a
// hand-built perfectly balanced routing, and the model (names, counts, the decode path).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "reference.hpp"
#include "nn/config.hpp"
#include "nn/kv_cache.hpp"
#include "nn/moe.hpp"
#include "nn/moe_routing.hpp"
#include "nn/transformer.hpp"
#include "ops/elementwise.hpp"
#include "ops/reduce.hpp"
#include "ops/shape_ops.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

namespace {

// Mixtral 8x7B's public configuration (config.json of mistralai/Mixtral-8x7B-v0.1).
TransformerConfig mixtral_8x7b() {
  TransformerConfig c = mixtral_preset();
  c.vocab = 32000;
  c.context = 32768;
  c.d_model = 4096;
  c.layers = 32;
  c.heads = 32;
  c.kv_heads = 8;
  c.head_dim = 128;
  c.mlp_hidden = 14336;
  c.rope_theta = 1e6;
  return c;
}

TransformerConfig toy_moe() {
  TransformerConfig c = mixtral_preset();
  c.vocab = 11;
  c.context = 8;
  c.d_model = 16;
  c.heads = 4;
  c.layers = 4;
  c.mlp_hidden = 24;
  return c;
}

}  // namespace

TEST_CASE("moe: the mixtral preset is llama with 8 experts, top 2, renormalised", "[moe][config]") {
  const TransformerConfig llama = llama_preset();
  TransformerConfig m = preset("mixtral");
  CHECK(m.experts == 8);
  CHECK(m.experts_top_k == 2);
  CHECK(m.moe_renorm);
  CHECK(m.moe_every == 1);
  CHECK(m.moe_capacity == 0.0);
  CHECK(m.moe_aux_coef == 0.01);
  CHECK(m.moe_z_coef == 0.001);
  // everything else is llama's
  m.experts = llama.experts;
  m.experts_top_k = llama.experts_top_k;
  CHECK(m == llama);
  // defaults (and what files of formats before 5 stand for) are dense
  CHECK(gpt2_preset().experts == 0);
  CHECK(config_before_fields().experts == 0);
  CHECK(gpt2_preset().moe_layers() == 0);
}

TEST_CASE("moe: top_k outside [1, experts] and moe_every past the layers are refused, naming "
          "the fields", "[moe][config]") {
  TransformerConfig c = toy_moe();
  c.validate();
  c.experts_top_k = 9;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("experts_top_k=9") &&
                                      Catch::Contains("experts=8"));
  c.experts_top_k = 0;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("experts_top_k"));
  c.experts_top_k = 8;  // every expert: legal (dense compute, sparse bookkeeping)
  CHECK_NOTHROW(c.validate());
  c.moe_every = 5;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("moe_every=5") && Catch::Contains("layers=4"));
  c.moe_every = 0;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("moe_every"));
  // a dense model ignores top_k and moe_every beyond their own ranges
  TransformerConfig dense = toy_moe();
  dense.experts = 0;
  dense.experts_top_k = 5;
  dense.moe_every = 7;
  CHECK_NOTHROW(dense.validate());
}

TEST_CASE("moe: moe_every puts experts in layers n-1, 2n-1, ...", "[moe][config]") {
  TransformerConfig c = toy_moe();
  c.moe_every = 2;
  CHECK_FALSE(c.is_moe_layer(0));
  CHECK(c.is_moe_layer(1));
  CHECK_FALSE(c.is_moe_layer(2));
  CHECK(c.is_moe_layer(3));
  CHECK(c.moe_layers() == 2);
  c.moe_every = 3;
  CHECK(c.moe_layers() == 1);
  CHECK(c.is_moe_layer(2));
  c.experts = 0;
  CHECK(c.moe_layers() == 0);
  CHECK_FALSE(c.is_moe_layer(2));
}

TEST_CASE("moe: Mixtral 8x7B's public configuration counts 46,702,792,704 total and "
          "12,879,925,248 active parameters", "[moe][config]") {
  const TransformerConfig c = mixtral_8x7b();
  c.validate();
  const ParameterCounts p = count_parameters(c);
  // by hand: one SwiGLU expert 3 x 4096 x 14336 = 176,160,768; a layer's router 4096 x 8
  CHECK(p.feed_forward == 32ULL * 8 * 176160768ULL);
  CHECK(p.router == 32ULL * 4096 * 8);
  CHECK(p.inactive_experts == 32ULL * 6 * 176160768ULL);
  CHECK(p.total() == 46702792704ULL);
  CHECK(p.active() == 12879925248ULL);
  // a dense model's active count is its total
  TransformerConfig dense = c;
  dense.experts = 0;
  CHECK(count_parameters(dense).active() == count_parameters(dense).total());
  CHECK(count_parameters(dense).router == 0);
  CHECK(count_parameters(dense).feed_forward == 32ULL * 176160768ULL);
}

TEST_CASE("moe: with moe_every 2 only half the layers hold experts", "[moe][config]") {
  TransformerConfig c = toy_moe();  // d_model 16, hidden 24, swiglu without bias, 4 layers
  c.moe_every = 2;
  const ParameterCounts p = count_parameters(c);
  const std::uint64_t mlp = 3 * 16 * 24;  // 1,152
  CHECK(p.feed_forward == 2 * mlp + 2 * 8 * mlp);
  CHECK(p.router == 2 * 16 * 8);
  CHECK(p.total() - p.active() == 2 * 6 * mlp);
}

TEST_CASE("moe: top k by probability, ties to the lower index, slots sorted by expert",
          "[moe]") {
  Array<double> p = Array<double>::from_shape({3, 4});
  const double rows[3][4] = {{0.25, 0.25, 0.25, 0.25},   // all tied: experts 0, 1
                             {0.1, 0.4, 0.1, 0.4},       // tied pair: 1 before 3
                             {0.5, 0.1, 0.3, 0.1}};      // 0, then 2
  for (std::size_t t = 0; t < 3; ++t)
    for (std::size_t e = 0; e < 4; ++e) p(t, e) = rows[t][e];
  const Routing r = route_top_k(p, 2);
  CHECK(r.chosen == std::vector<std::size_t>{0, 1, 1, 3, 0, 2});
  // expert 0: tokens 0, 2; expert 1: tokens 0, 1; expert 2: token 2; expert 3: token 1
  CHECK(r.expert_start == std::vector<std::size_t>{0, 2, 4, 5, 6});
  const std::vector<std::int64_t> tokens(r.token_of_slot.begin(), r.token_of_slot.end());
  CHECK(tokens == std::vector<std::int64_t>{0, 2, 0, 1, 2, 1});
  // token 1's second choice (expert 3) sits in slot 5, token 2's first (expert 0) in slot 1
  CHECK(r.slot_of_choice(1, 1) == 5);
  CHECK(r.slot_of_choice(2, 0) == 1);
  CHECK(r.choice_index(1, 1) == 1 * 4 + 3);
  CHECK(r.fraction == std::vector<double>{2.0 / 3, 2.0 / 3, 1.0 / 3, 1.0 / 3});
  CHECK_THROWS_WITH(route_top_k(p, 5), Catch::Contains("route_top_k") && Catch::Contains("k=5"));
}

namespace {

MoEConfig small_moe(std::size_t k, bool renorm, bool swiglu) {
  MoEConfig c;
  c.d_model = 4;
  c.hidden = 6;
  c.experts = 4;
  c.top_k = k;
  c.renorm = renorm;
  c.mlp = swiglu ? MlpKind::swiglu : MlpKind::gelu;
  c.mlp_bias = !swiglu;
  c.std = 0.7;  // a router far from uniform, so that no two probabilities are near a tie
  c.out_std = 0.5;
  return c;
}

// The input first, then every parameter of `m`.
std::vector<Tensor<double>> with_parameters(const Tensor<double>& x, const Module<double>& m) {
  std::vector<Tensor<double>> in{x};
  for (const Tensor<double>& p : m.parameters()) in.push_back(p);
  return in;
}

// y (flattened), aux and z of one forward, as one vector for gradcheck
Tensor<double> outputs_and_losses(MixtureOfExperts<double>& moe, const Tensor<double>& x) {
  const Tensor<double> y = moe(x);
  return concatenate<double>({reshape(y, {y.size()}), reshape(moe.aux_loss(), {1}),
                              reshape(moe.z_loss(), {1})}, 0);
}

}  // namespace

TEST_CASE("moe: gradcheck in double through the layer, its aux and z losses (k = 1 and 2, "
          "renorm on and off, SwiGLU and GELU experts)", "[moe][gradcheck]") {
  for (const std::size_t k : {1, 2}) {
    for (const bool renorm : {true, false}) {
      for (const bool swiglu : {true, false}) {
        INFO("k=" << k << " renorm=" << renorm << " swiglu=" << swiglu);
        Generator gen(10 + k);
        MixtureOfExperts<double> moe(small_moe(k, renorm, swiglu), gen);
        const Tensor<double> x = random<double>({2, 5, 4}, 21 + k);
        require_gradcheck<double>(
            [&](const std::vector<Tensor<double>>& in) { return outputs_and_losses(moe, in[0]); },
            with_parameters(x, moe));
        // every expert got tokens or not, the check above covered each one that did
        CHECK(moe.routing().tokens == 10);
      }
    }
  }
}

TEST_CASE("moe: k = 1 with renorm, the LM loss gives the router exactly zero gradient, "
          "the aux loss does, and without renorm the LM loss does", "[moe]") {
  const Tensor<double> x = random<double>({3, 4}, 5);
  const Tensor<double> R = random<double>({3, 4}, 6);
  const auto router_grad_norm = [&](bool renorm, bool through_aux) {
    Generator gen(3);
    MixtureOfExperts<double> moe(small_moe(1, renorm, true), gen);
    const Tensor<double> y = moe(x);
    const Tensor<double> loss = through_aux ? moe.aux_loss() : sum(y * R);
    loss.backward();
    const Tensor<double>& w = moe.named_parameters().front().tensor;
    REQUIRE(moe.named_parameters().front().name == "router.weight");
    double norm = 0;
    if (w.has_grad())
      for (double g : w.grad()) norm += std::abs(g);
    return norm;
  };
  CHECK(router_grad_norm(true, false) == 0.0);  // exactly, not approximately
  CHECK(router_grad_norm(true, true) > 1e-6);
  CHECK(router_grad_norm(false, false) > 1e-6);
}

TEST_CASE("moe: the aux loss is exactly k at a hand-built perfectly balanced routing, and "
          "changes with the router", "[moe]") {
  // E = 4, the router the identity x 2: token r's logits are the rotation r of (3, 2, 1, 0)
  // x 2, so its top 2 are experts r and r + 1 (mod 4): each expert is chosen by 2 of the 4
  // tokens (f_e = 1/2) and each column of p holds the same 4 values (P_e = 1/4):
  // aux = 4 * sum_e (1/2)(1/4) = 2 = k.
  Generator gen(1);
  MoEConfig c = small_moe(2, true, true);
  MixtureOfExperts<double> moe(c, gen);
  Tensor<double> router_weight = moe.parameter("router.weight");
  Array<double>& router = router_weight.value();
  router.fill(0.0);
  for (std::size_t i = 0; i < 4; ++i) router(i, i) = 2.0;
  Array<double> xs = Array<double>::from_shape({4, 4});
  for (std::size_t r = 0; r < 4; ++r)
    for (std::size_t i = 0; i < 4; ++i) xs(r, (r + i) % 4) = 3.0 - double(i);
  moe(Tensor<double>(xs));
  CHECK(moe.routing().fraction == std::vector<double>{0.5, 0.5, 0.5, 0.5});
  CHECK(moe.aux_loss().item() == Approx(2.0).epsilon(1e-12));
  // all tokens to experts 0 and 1: f = (1, 1, 0, 0), P piles up there, aux > k
  for (std::size_t r = 0; r < 4; ++r)
    for (std::size_t i = 0; i < 4; ++i) xs(r, i) = 3.0 - double(i);
  moe(Tensor<double>(xs));
  CHECK(moe.aux_loss().item() > 2.5);
}

TEST_CASE("moe: tokens that do not count (prompts, padding) leave f and P: the aux loss equals "
          "the layer's on the counted tokens alone", "[moe]") {
  Generator gen(4);
  MixtureOfExperts<double> moe(small_moe(2, true, true), gen);
  const Tensor<double> x = random<double>({6, 4}, 8);
  const std::vector<bool> counted = {true, false, true, true, false, true};
  moe.set_counted_tokens(counted);
  moe(x);
  const double masked = moe.aux_loss().item();
  // the counted rows 0, 2, 3, 5 alone, through the same weights
  Array<double> rows = Array<double>::from_shape({4, 4});
  std::size_t r = 0;
  for (std::size_t t = 0; t < 6; ++t)
    if (counted[t]) {
      for (std::size_t i = 0; i < 4; ++i) rows(r, i) = x.value()(t, i);
      ++r;
    }
  moe.set_counted_tokens({});
  moe(Tensor<double>(rows));
  CHECK(masked == Approx(moe.aux_loss().item()).epsilon(1e-14));
  moe(x);
  CHECK(moe.aux_loss().item() != Approx(masked).epsilon(1e-6));  // all six differ
  moe.set_counted_tokens({true, false});
  CHECK_THROWS_WITH(moe(x), Catch::Contains("MixtureOfExperts") && Catch::Contains("(6,4)"));
}

TEST_CASE("moe: a mixtral model has its parameter names, counts and decode path",
          "[moe]") {
  TransformerConfig c = toy_moe();
  c.moe_every = 2;
  c.seed = 9;
  Transformer<double> model(c);
  CHECK(model.parameter_count() == count_parameters(c).total());
  std::set<std::string> names;
  for (const NamedParameter<double>& p : model.named_parameters()) names.insert(p.name);
  CHECK(names.count("blocks.0.mlp.gate.weight") == 1);
  CHECK(names.count("blocks.1.moe.router.weight") == 1);
  CHECK(names.count("blocks.1.moe.experts.7.down.weight") == 1);
  CHECK(names.count("blocks.0.moe.router.weight") == 0);
  // the decode path routes each new token: one token at a time equals the full forward
  const Indices ids = random_tokens(1, 8, c.vocab, 4);
  NoGradGuard no_grad;
  const Tensor<double> full = model.forward(ids);
  KVCacheSet<double> caches(c, 1, 8);
  double worst = 0;
  for (std::size_t t = 0; t < 8; ++t) {
    Indices one = Indices::from_shape({1, 1});
    one(0, 0) = ids(0, t);
    const Tensor<double> step = model.forward(one, caches);
    for (std::size_t v = 0; v < c.vocab; ++v)
      worst = std::max(worst, std::abs(step.value()(0, 0, v) - full.value()(0, t, v)));
  }
  CHECK(worst <= 1e-12);
}

namespace {

// The raw losses computed here from each MoE layer's router logits (read at the hook point),
// by the docs' definitions: aux = E * sum_e f_e * P_e (f_e the fraction of tokens with e
// among their top k, P_e the mean router probability), z = mean_t logsumexp(logits_t)^2,
// each averaged over the MoE layers.
std::pair<double, double> raw_moe_losses(Transformer<double>& model, const Indices& tokens) {
  const CachedRun<double> run = run_with_cache(model, tokens);
  const std::size_t E = model.config().experts, k = model.config().experts_top_k;
  double aux = 0, z = 0;
  std::size_t layers = 0;
  for (std::size_t l = 0; l < model.config().layers; ++l) {
    if (!model.config().is_moe_layer(l)) continue;
    const Array<double>& logits = run.cache[block_point(l, "moe.router_logits")].value();
    const std::size_t N = logits.shape()[0];
    std::vector<double> f(E, 0.0), P(E, 0.0);
    double z_sum = 0;
    for (std::size_t t = 0; t < N; ++t) {
      double top = logits(t, 0);
      for (std::size_t e = 1; e < E; ++e) top = std::max(top, logits(t, e));
      double total = 0;
      for (std::size_t e = 0; e < E; ++e) total += std::exp(logits(t, e) - top);
      const double lse = top + std::log(total);
      z_sum += lse * lse;
      std::vector<std::size_t> order(E);
      for (std::size_t e = 0; e < E; ++e) {
        order[e] = e;
        P[e] += std::exp(logits(t, e) - lse) / double(N);
      }
      std::stable_sort(order.begin(), order.end(),
                       [&](std::size_t a, std::size_t b) { return logits(t, a) > logits(t, b); });
      for (std::size_t j = 0; j < k; ++j) f[order[j]] += 1.0 / double(N);
    }
    double layer_aux = 0;
    for (std::size_t e = 0; e < E; ++e) layer_aux += f[e] * P[e];
    aux += double(E) * layer_aux;
    z += z_sum / double(N);
    ++layers;
  }
  return {aux / double(layers), z / double(layers)};
}

}  // namespace

TEST_CASE("moe: the training loss reports the raw aux and z losses and weighs them in the "
          "total, and loss() is the LM loss alone", "[moe]") {
  TransformerConfig c = toy_moe();
  c.moe_every = 2;
  const Indices tokens = random_tokens(2, 8, c.vocab, 1), targets = random_tokens(2, 8, c.vocab, 2);
  for (const double aux_coef : {0.0, 0.5}) {
    INFO("moe_aux_coef " << aux_coef);
    c.moe_aux_coef = aux_coef;
    c.moe_z_coef = 0.25;
    Transformer<double> model(c);
    const auto [aux, z] = raw_moe_losses(model, tokens);
    const TrainingLoss<double> t = model.training_loss(tokens, targets);
    CHECK(t.aux.item() > 0);  // watched even when it is not trained on
    CHECK(t.aux.item() == Approx(aux).epsilon(1e-12));
    CHECK(t.z.item() == Approx(z).epsilon(1e-12));
    CHECK(t.total.item() ==
          Approx(t.lm.item() + aux_coef * aux + 0.25 * z).epsilon(1e-12));
    CHECK(model.loss(tokens, targets).item() == t.lm.item());
  }
}

TEST_CASE("moe: k = 1 with renorm warns that the router gets no gradient", "[moe]") {
  CHECK(dead_router_warning().find("no gradient") != std::string::npos);
}

TEST_CASE("moe: expert capacity is ceil(c T k / E), at least 1, 0 without a factor", "[moe][capacity]") {
  CHECK(expert_capacity(0.0, 100, 2, 8) == 0);
  CHECK(expert_capacity(1.0, 100, 2, 8) == 25);    // 200 choices over 8 experts
  CHECK(expert_capacity(1.25, 100, 2, 8) == 32);   // 31.25 up
  CHECK(expert_capacity(0.01, 3, 1, 4) == 1);      // never 0 slots
  CHECK_THROWS_WITH(expert_capacity(-1.0, 3, 1, 4), Catch::Contains("expert_capacity"));
}

TEST_CASE("moe: an expert over capacity keeps its earliest tokens and the rest read a zero row",
          "[moe][capacity]") {
  // 4 tokens, 2 experts, k = 1: tokens 0, 1, 3 choose expert 0, token 2 expert 1
  Array<double> p = Array<double>::from_shape({4, 2});
  const double rows[4][2] = {{0.9, 0.1}, {0.6, 0.4}, {0.2, 0.8}, {0.7, 0.3}};
  for (std::size_t t = 0; t < 4; ++t)
    for (std::size_t e = 0; e < 2; ++e) p(t, e) = rows[t][e];
  const Routing r = route_top_k(p, 1, 2);  // 2 slots per expert
  CHECK(r.expert_start == std::vector<std::size_t>{0, 2, 3});
  const std::vector<std::int64_t> tokens(r.token_of_slot.begin(), r.token_of_slot.end());
  CHECK(tokens == std::vector<std::int64_t>{0, 1, 2});
  CHECK(r.dropped == 1);
  CHECK(r.slot_of_choice(3, 0) == 3);  // kept() = 3: the zero row after the kept slots
  CHECK(r.dropped_fraction() == 0.25);
  CHECK(r.fraction == std::vector<double>{0.75, 0.25});  // the load before the drop

  // in the layer: token 3's output is exactly 0 and the others are as without capacity
  MoEConfig c = small_moe(1, false, false);
  c.experts = 2;
  Generator g1(3), g2(3);
  MixtureOfExperts<double> dropless(c, g1);
  c.capacity = 0.5;  // ceil(0.5 * 8 * 1 / 2) = 2 slots per expert for 8 tokens
  MixtureOfExperts<double> limited(c, g2);
  limited.set_training(true);  // the capacity limits training forwards only
  const Tensor<double> x = random<double>({8, 4}, 7);
  const Array<double> a = dropless(x).value(), b = limited(x).value();
  const Routing& lr = limited.routing();
  REQUIRE(lr.capacity == 2);
  REQUIRE(lr.dropped > 0);
  std::size_t zero_rows = 0;
  for (std::size_t t = 0; t < 8; ++t) {
    const bool dropped = std::size_t(lr.slot_of_choice(t, 0)) == lr.kept();
    zero_rows += dropped;
    // kept rows: the same up to the rounding of a matrix product over fewer rows
    for (std::size_t d = 0; d < 4; ++d)
      if (dropped) CHECK(b(t, d) == 0.0);
      else CHECK(b(t, d) == Approx(a(t, d)).epsilon(1e-12).margin(1e-14));
  }
  CHECK(zero_rows == lr.dropped);
}

TEST_CASE("moe: gradcheck in double with capacity dropping (k = 1 and 2)", "[moe][gradcheck][capacity]") {
  for (const std::size_t k : {1, 2}) {
    INFO("k=" << k);
    MoEConfig c = small_moe(k, k == 2, false);
    c.capacity = 0.6;
    Generator gen(30 + k);
    MixtureOfExperts<double> moe(c, gen);
    moe.set_training(true);
    const Tensor<double> x = random<double>({2, 5, 4}, 41 + k);
    require_gradcheck<double>(
        [&](const std::vector<Tensor<double>>& in) { return outputs_and_losses(moe, in[0]); },
        with_parameters(x, moe));
    CHECK(moe.routing().dropped > 0);  // the check went through dropped choices
  }
}

TEST_CASE("moe: in training, a model with room for every choice equals the dropless one, a "
          "tight one differs", "[moe][capacity]") {
  Indices tokens = Indices::from_shape({2, 6});
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens.data()[i] = std::int64_t(i % 11);
  const Indices targets = random_tokens(2, 6, 11, 3);
  TransformerConfig c = toy_moe();
  const float dropless = Transformer<float>(c).training_loss(tokens, targets).lm.item();
  c.moe_capacity = 4.0;  // ceil(4 * 12 * 2 / 8) = 12 slots: every token fits one expert
  CHECK(Transformer<float>(c).training_loss(tokens, targets).lm.item() == dropless);
  c.moe_capacity = 0.25;  // 2 slots per expert for 24 choices: most are dropped
  Transformer<float> tight(c);
  const float dropped = tight.training_loss(tokens, targets).lm.item();
  CHECK(dropped != dropless);
  CHECK(std::isfinite(dropped));
  for (const Block<float>& b : tight.blocks()) CHECK(b.moe()->routing().dropped >= 8);
}

namespace {

// tapegrad's name of each fixture weight (tests/make_moe_fixtures.py's)
std::vector<std::pair<std::string, std::string>> fixture_names(std::size_t E, bool swiglu) {
  std::vector<std::pair<std::string, std::string>> names = {{"router.weight", "router"}};
  for (std::size_t e = 0; e < E; ++e) {
    const std::string p = "experts." + std::to_string(e) + ".", f = "e" + std::to_string(e) + "_";
    if (swiglu) {
      for (const char* m : {"gate", "up", "down"}) names.push_back({p + m + ".weight", f + m});
    } else {
      names.push_back({p + "fc.weight", f + "fc"});
      names.push_back({p + "fc.bias", f + "fc_bias"});
      names.push_back({p + "proj.weight", f + "proj"});
      names.push_back({p + "proj.bias", f + "proj_bias"});
    }
  }
  return names;
}

}  // namespace

TEST_CASE("moe: outputs, aux and z losses and every gradient match PyTorch's Mixtral-style "
          "loop over experts (float64, 1e-10)", "[moe][reference]") {
  const std::string kSet = "moe";
  for (const std::string name : {"k2_renorm_swiglu", "k2_raw_swiglu", "k1_renorm_swiglu",
                                 "k1_raw_gelu", "k3_renorm_gelu"}) {
    INFO("case " << name << " (tests/make_moe_fixtures.py)");
    const Array<double> config = load_fixture(kSet, name, "config");
    const Array<double> x0 = load_fixture(kSet, name, "x");
    MoEConfig c;
    c.experts = static_cast<std::size_t>(config(0));
    c.top_k = static_cast<std::size_t>(config(1));
    c.renorm = config(2) != 0;
    const bool swiglu = config(3) != 0;
    c.mlp = swiglu ? MlpKind::swiglu : MlpKind::gelu;
    c.mlp_bias = !swiglu;
    c.d_model = x0.shape().back();
    c.hidden = load_fixture(kSet, name, swiglu ? "e0_gate" : "e0_fc").shape()[1];
    Generator gen(0);
    MixtureOfExperts<double> moe(c, gen);
    const auto names = fixture_names(c.experts, swiglu);
    REQUIRE(names.size() == moe.named_parameters().size());
    for (const auto& [param, file] : names) {
      Tensor<double> weight = moe.parameter(param);
      Array<double>& dst = weight.value();
      const Array<double> src = load_fixture(kSet, name, file);
      REQUIRE(dst.shape() == src.shape());
      dst = src;
    }
    Tensor<double> x(x0, true);
    const Tensor<double> y = moe(x);
    check_close("y", y.value(), load_fixture(kSet, name, "y"), 1e-10);
    CHECK(std::abs(moe.aux_loss().item() - load_fixture(kSet, name, "aux")(0)) < 1e-10);
    CHECK(std::abs(moe.z_loss().item() - load_fixture(kSet, name, "z")(0)) < 1e-10);
    const Tensor<double> L = sum(y * Tensor<double>(load_fixture(kSet, name, "gy"))) +
                             moe.aux_loss() * 0.5 + moe.z_loss() * 0.25;
    L.backward();
    check_close("dx", x.grad(), load_fixture(kSet, name, "dx"), 1e-10);
    for (const auto& [param, file] : names) {
      const Tensor<double> p = moe.parameter(param);
      const Array<double> want = load_fixture(kSet, name, "d" + file);
      // a weight of an expert no token reached has no gradient; torch's is then zero
      if (!p.has_grad()) {
        CHECK(xt::amax(xt::abs(want))() == 0.0);
        continue;
      }
      check_close("d" + file, p.grad(), want, 1e-10);
    }
  }
}
