// The router's two halves alone (nn/moe_routing.hpp) and the one FeedForward the dense block
// and each expert share (nn/feed_forward.hpp).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "helpers.hpp"
#include "nn/feed_forward.hpp"
#include "nn/moe_routing.hpp"
#include "nn/transformer.hpp"
#include "ops/reduce.hpp"

using namespace tapegrad;
using tapegrad::test::make;

namespace {

Array<double> probabilities(const std::vector<std::vector<double>>& rows) {
  Array<double> p = Array<double>::from_shape({rows.size(), rows[0].size()});
  for (std::size_t t = 0; t < rows.size(); ++t)
    for (std::size_t e = 0; e < rows[t].size(); ++e) p(t, e) = rows[t][e];
  return p;
}

std::vector<std::int64_t> as_vector(const Indices& ids) { return {ids.begin(), ids.end()}; }

// The parameter names of layer 0's feed-forward (mlp.* or moe.*), in registration order.
std::vector<std::string> feed_forward_names(TransformerConfig c) {
  c.vocab = 11;
  c.context = 8;
  c.d_model = 8;
  c.heads = 2;
  c.kv_heads = std::min<std::size_t>(c.kv_heads, c.heads);
  c.layers = 1;
  c.mlp_hidden = 12;
  if (c.experts > 0) c.experts = 2;
  std::vector<std::string> names;
  const Transformer<float> model(c);
  for (const auto& p : model.named_parameters())
    if (p.name.rfind("blocks.0.mlp.", 0) == 0 || p.name.rfind("blocks.0.moe.", 0) == 0)
      names.push_back(p.name);
  return names;
}

}  // namespace

TEST_CASE("router choose: top k by probability, ties to the lower expert", "[moe][router]") {
  const Array<double> p = probabilities({{0.1, 0.4, 0.4, 0.1},     // tie: 1 before 2
                                         {0.25, 0.25, 0.25, 0.25},  // all tied: 0, 1, 2
                                         {0.5, 0.1, 0.2, 0.2}});    // 0, then the tie 2, 3
  CHECK(choose_top_k(p, 3) == std::vector<std::size_t>{1, 2, 0, 0, 1, 2, 0, 2, 3});
  CHECK(choose_top_k(p, 1) == std::vector<std::size_t>{1, 0, 0});
  CHECK_THROWS_WITH(choose_top_k(p, 0), Catch::Contains("k=0"));
}

TEST_CASE("router choose: kept weights with and without renormalisation", "[moe][router]") {
  const Array<double> p = probabilities({{0.1, 0.6, 0.3}, {0.2, 0.2, 0.6}});
  const Routing r = plan_dispatch(choose_top_k(p, 2), 2, 3, 2);  // {1, 2}, {2, 0}
  const Tensor<double> probs(p, true);

  const Tensor<double> raw = kept_weights(probs, r, false);
  CHECK(raw.shape() == Shape{2, 2});
  CHECK(raw.value()(0, 0) == 0.6);
  CHECK(raw.value()(0, 1) == 0.3);
  CHECK(raw.value()(1, 0) == 0.6);
  CHECK(raw.value()(1, 1) == 0.2);
  sum(raw).backward();  // the gradient reaches the kept entries alone
  CHECK(probs.grad()(0, 0) == 0.0);
  CHECK(probs.grad()(0, 1) == 1.0);
  CHECK(probs.grad()(1, 1) == 0.0);
  CHECK(probs.grad()(1, 0) == 1.0);

  const Tensor<double> renormed = kept_weights(Tensor<double>(p), r, true);
  CHECK(renormed.value()(0, 0) == Approx(0.6 / 0.9));
  CHECK(renormed.value()(0, 1) == Approx(0.3 / 0.9));
  CHECK(renormed.value()(1, 0) == Approx(0.6 / 0.8));
  CHECK(renormed.value()(1, 1) == Approx(0.2 / 0.8));

  // k = 1 renormalised: exactly 1, a constant the router gets no gradient through
  const Routing one = plan_dispatch(choose_top_k(p, 1), 2, 3, 1);
  const Tensor<double> ones = kept_weights(Tensor<double>(p, true), one, true);
  CHECK(ones.value()(0, 0) == 1.0);
  CHECK(ones.value()(1, 0) == 1.0);
  CHECK_FALSE(ones.requires_grad());
  CHECK_THROWS_WITH(kept_weights(Tensor<double>(p), plan_dispatch({0, 1, 2}, 3, 3, 1), false),
                    Catch::Contains("kept_weights") && Catch::Contains("(2,3)"));
}

TEST_CASE("router choose: load-balancing and z losses at hand-made points", "[moe][router]") {
  // every token to expert 0 while p is uniform: f = (1, 0), P = (1/2, 1/2) -> 2 * 1/2 = 1
  const Array<double> uniform = probabilities({{0.5, 0.5}, {0.5, 0.5}, {0.5, 0.5}});
  const Routing r = plan_dispatch({0, 0, 0}, 3, 2, 1);
  CHECK(load_balancing_loss(Tensor<double>(uniform), r, {}).item() == Approx(1.0));
  // counting token 1 alone changes nothing here; counting none gives zero
  CHECK(load_balancing_loss(Tensor<double>(uniform), r, {false, true, false}).item() ==
        Approx(1.0));
  CHECK(load_balancing_loss(Tensor<double>(uniform), r, {false, false, false}).item() == 0.0);
  // balanced: tokens split over the two experts, p one-hot on the chosen one -> 2 * (1/4 + 1/4)
  const Array<double> sharp = probabilities({{1.0, 0.0}, {0.0, 1.0}});
  CHECK(load_balancing_loss(Tensor<double>(sharp), plan_dispatch({0, 1}, 2, 2, 1), {}).item() ==
        Approx(1.0));
  // logits all zero over 4 experts: logsumexp = log 4 on every row
  const Tensor<double> logits = Tensor<double>::zeros({3, 4});
  CHECK(router_z_loss(logits).item() == Approx(std::log(4.0) * std::log(4.0)));
}

TEST_CASE("router dispatch: slots sorted by expert, in token order, capacity drops the latest",
          "[moe][router]") {
  // token 0 -> {2, 0}, token 1 -> {0, 1}, token 2 -> {2, 1}
  const Routing r = plan_dispatch({2, 0, 0, 1, 2, 1}, 3, 3, 2);
  CHECK(r.expert_start == std::vector<std::size_t>{0, 2, 4, 6});
  CHECK(as_vector(r.token_of_slot) == std::vector<std::int64_t>{0, 1, 1, 2, 0, 2});
  CHECK(as_vector(r.slot_of_choice) == std::vector<std::int64_t>{4, 0, 1, 2, 5, 3});
  CHECK(r.dropped == 0);

  const Routing tight = plan_dispatch({2, 0, 0, 1, 2, 1}, 3, 3, 2, 1);
  CHECK(tight.expert_start == std::vector<std::size_t>{0, 1, 2, 3});
  CHECK(as_vector(tight.token_of_slot) == std::vector<std::int64_t>{0, 1, 0});
  // slot 3 is the zero row after the 3 kept slots
  CHECK(as_vector(tight.slot_of_choice) == std::vector<std::int64_t>{2, 0, 3, 1, 3, 3});
  CHECK(tight.dropped == 3);
  CHECK_THROWS_WITH(plan_dispatch({0, 3}, 2, 3, 1), Catch::Contains("plan_dispatch") &&
                                                        Catch::Contains("expert 3"));
}

TEST_CASE("router dispatch: each expert runs on its own rows and the weights combine them",
          "[moe][router]") {
  const Tensor<double> x = make<double>({3, 2}, {1, 2, 3, 4, 5, 6}, true);
  const Tensor<double> w = make<double>({3, 2}, {0.5, 0.25, 2, 1, 1, 3});
  const std::vector<std::size_t> chosen{2, 0, 0, 1, 2, 1};
  // expert e scales its rows by e + 1, so each output tells which expert made it
  std::vector<std::size_t> rows_seen(4, 0);
  const ExpertFunction<double> scale = [&rows_seen](std::size_t e, const Tensor<double>& rows) {
    rows_seen[e] += rows.shape()[0];
    return rows * double(e + 1);
  };

  const Routing r = plan_dispatch(chosen, 3, 4, 2);  // expert 3 idle
  const Tensor<double> y = combine_experts(run_experts(x, r, scale), r, w);
  CHECK(rows_seen[0] == 2);
  CHECK(rows_seen[1] == 2);
  CHECK(rows_seen[2] == 2);
  CHECK(rows_seen[3] == 0);  // idle: never called
  // y[t] = sum_j w[t, j] * (e_j + 1) * x[t]
  const double factor[3] = {0.5 * 3 + 0.25 * 1, 2 * 1 + 1 * 2, 1 * 3 + 3 * 2};
  for (std::size_t t = 0; t < 3; ++t)
    for (std::size_t d = 0; d < 2; ++d) CHECK(y.value()(t, d) == Approx(factor[t] * x.value()(t, d)));
  sum(y).backward();  // the scatter-add returns each token its own factor
  for (std::size_t t = 0; t < 3; ++t) CHECK(x.grad()(t, 0) == Approx(factor[t]));

  // capacity 1: the dropped choices read the zero row and add nothing
  const Routing tight = plan_dispatch(chosen, 3, 4, 2, 1);
  const Tensor<double> kept = combine_experts(run_experts(x, tight, scale), tight, w);
  const double kept_factor[3] = {0.5 * 3 + 0.25 * 1, 1 * 2, 0};
  for (std::size_t t = 0; t < 3; ++t)
    CHECK(kept.value()(t, 1) == Approx(kept_factor[t] * x.value()(t, 1)));
}

TEST_CASE("feed-forward: one part for the dense block and the experts, names as checkpoints "
          "know them", "[moe][block][feed_forward]") {
  CHECK(feed_forward_names(gpt2_preset()) ==
        std::vector<std::string>{"blocks.0.mlp.fc.weight", "blocks.0.mlp.fc.bias",
                                 "blocks.0.mlp.proj.weight", "blocks.0.mlp.proj.bias"});
  CHECK(feed_forward_names(llama_preset()) ==
        std::vector<std::string>{"blocks.0.mlp.gate.weight", "blocks.0.mlp.up.weight",
                                 "blocks.0.mlp.down.weight"});
  CHECK(feed_forward_names(mixtral_preset()) ==
        std::vector<std::string>{"blocks.0.moe.router.weight",
                                 "blocks.0.moe.experts.0.gate.weight",
                                 "blocks.0.moe.experts.0.up.weight",
                                 "blocks.0.moe.experts.0.down.weight",
                                 "blocks.0.moe.experts.1.gate.weight",
                                 "blocks.0.moe.experts.1.up.weight",
                                 "blocks.0.moe.experts.1.down.weight"});

  // the shared part's kinds: gelu: proj(gelu(fc(x))); swiglu: down(silu(gate(x)) * up(x))
  Generator gen(3);
  const FeedForward<double> gelu({4, 6, MlpKind::gelu, true}, gen);
  const FeedForward<double> swiglu({4, 6, MlpKind::swiglu, false}, gen);
  CHECK(gelu.named_parameters().size() == 4);
  CHECK(swiglu.named_parameters().size() == 3);
  CHECK(swiglu.named_parameters()[1].name == "up.weight");
  CHECK(swiglu.named_parameters()[1].tensor.shape() == Shape{4, 6});
  CHECK(gelu(Tensor<double>::ones({2, 3, 4})).shape() == Shape{2, 3, 4});
  // every kind of the one list (nn/feed_forward_kind.hpp) builds its matrices, none refuses
  for (std::size_t k = 0; k < mlp_kind_names().size(); ++k) {
    const auto kind = static_cast<MlpKind>(k);
    INFO("mlp=" << mlp_kind_names()[k]);
    if (mlp_matrices(kind) == 0) {
      CHECK_THROWS_WITH(FeedForward<double>({4, 6, kind, false}, gen), Catch::Contains("none"));
      continue;
    }
    const FeedForward<double> part({4, 6, kind, false}, gen);
    CHECK(part.named_parameters().size() == mlp_matrices(kind));
  }
}
