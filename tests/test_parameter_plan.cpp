// nn/parameter_plan: the parameters described from the configuration alone, held to the
// model the modules build. For every preset and for configurations that switch each part on
// and off, the plan's walk must give the built model's named_parameters(), name for name
// and shape for shape in order, and its totals and count_parameters' per-role sums must
// equal the model's, where the roles are read back from the model's own names.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "nn/config.hpp"
#include "nn/parameter_plan.hpp"
#include "nn/transformer.hpp"

using namespace tapegrad;

namespace {

TransformerConfig sized(TransformerConfig c) {
  c.vocab = 11;
  c.context = 9;
  c.d_model = 16;
  c.heads = 4;
  c.layers = 3;
  return c;
}

TransformerConfig from_preset(const std::string& name) {
  TransformerConfig c = sized(preset(name));
  finish_preset(name, c);
  return c;
}

// Each preset, and from gpt2's and llama's one switch at a time, then a few together.
std::vector<std::pair<std::string, TransformerConfig>> configs() {
  std::vector<std::pair<std::string, TransformerConfig>> out;
  for (const std::string& name : preset_names()) out.push_back({name, from_preset(name)});
  for (const char* base : {"gpt2", "llama"}) {
    const TransformerConfig b = from_preset(base);
    const auto with = [&](const std::string& what, auto change) {
      TransformerConfig c = b;
      change(c);
      out.push_back({std::string(base) + " " + what, c});
    };
    with("layer_norm", [](TransformerConfig& c) { c.norm = NormKind::layer_norm; });
    with("rms", [](TransformerConfig& c) { c.norm = NormKind::rms_norm; });
    with("gemma norm", [](TransformerConfig& c) { c.norm = NormKind::gemma; });
    with("mlp biases", [](TransformerConfig& c) { c.mlp_bias = true; });
    with("no mlp biases", [](TransformerConfig& c) { c.mlp_bias = false; });
    with("qkv bias", [](TransformerConfig& c) { c.attn_qkv_bias = true; });
    with("out bias", [](TransformerConfig& c) { c.attn_out_bias = true; });
    with("qk_norm", [](TransformerConfig& c) { c.qk_norm = true; });
    with("temperature", [](TransformerConfig& c) { c.learned_temperature = true; });
    with("tied", [](TransformerConfig& c) { c.tie_embeddings = true; });
    with("untied", [](TransformerConfig& c) { c.tie_embeddings = false; });
    with("no positions", [](TransformerConfig& c) { c.positions = PositionKind::none; });
    with("learned positions", [](TransformerConfig& c) { c.positions = PositionKind::learned; });
    with("post_norms", [](TransformerConfig& c) { c.post_norms = true; });
    with("embed_norm", [](TransformerConfig& c) { c.embed_norm = true; });
    with("mlp none", [](TransformerConfig& c) { c.mlp = MlpKind::none; });
    with("mlp none post_norms", [](TransformerConfig& c) {
      c.mlp = MlpKind::none;
      c.post_norms = true;
    });
    with("geglu", [](TransformerConfig& c) { c.mlp = MlpKind::geglu; });
    with("head_dim 6", [](TransformerConfig& c) { c.head_dim = 6; });
    with("gqa", [](TransformerConfig& c) { c.kv_heads = 2; });
    with("mqa head_dim 6 qkv bias", [](TransformerConfig& c) {
      c.kv_heads = 1;
      c.head_dim = 6;
      c.attn_qkv_bias = true;
    });
    with("mlp_hidden 20", [](TransformerConfig& c) { c.mlp_hidden = 20; });
    for (std::size_t every : {1, 2, 3}) {
      with("moe every " + std::to_string(every), [&](TransformerConfig& c) {
        c.layers = 4;
        c.experts = 3;
        c.experts_top_k = 2;
        c.moe_every = every;
      });
    }
    with("moe every 2 with everything", [](TransformerConfig& c) {
      c.layers = 4;
      c.experts = 4;
      c.experts_top_k = 3;
      c.moe_every = 2;
      c.mlp_bias = true;
      c.post_norms = true;
      c.embed_norm = true;
      c.qk_norm = true;
      c.learned_temperature = true;
      c.attn_qkv_bias = c.attn_out_bias = true;
      c.kv_heads = 2;
      c.head_dim = 6;
      c.tie_embeddings = false;
    });
  }
  return out;
}

// The role of a parameter, read from the model's name alone (not from the plan).
ParameterRole role_by_name(const std::string& name) {
  const auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
  if (name.rfind("tok_emb.", 0) == 0) return ParameterRole::token_embedding;
  if (name.rfind("pos_emb.", 0) == 0) return ParameterRole::position_embedding;
  if (name.rfind("head.", 0) == 0) return ParameterRole::unembedding;
  if (has(".attn.Wq") || has(".attn.bq")) return ParameterRole::attention_q;
  if (has(".attn.Wk") || has(".attn.bk") || has(".attn.Wv") || has(".attn.bv"))
    return ParameterRole::attention_kv;
  if (has(".attn.Wo") || has(".attn.bo")) return ParameterRole::attention_out;
  if (has(".attn.q_norm.") || has(".attn.k_norm.")) return ParameterRole::qk_norm;
  if (has(".attn.temperature")) return ParameterRole::temperature;
  if (has(".moe.router.")) return ParameterRole::router;
  if (has(".mlp.") || has(".moe.experts.")) return ParameterRole::feed_forward;
  return ParameterRole::norm;
}

// The model's counts per role, and the experts a token skips: (experts - top_k) times the
// size of expert 0 in each MoE layer.
ParameterCounts counts_of(const Transformer<float>& model) {
  const TransformerConfig& c = model.config();
  ParameterCounts p;
  for (const NamedParameter<float>& param : model.named_parameters()) {
    const std::uint64_t n = param.tensor.size();
    add_to_row(p, role_by_name(param.name), n);
    if (param.name.find(".moe.experts.0.") != std::string::npos)
      p.inactive_experts += (c.experts - c.experts_top_k) * n;
  }
  return p;
}

}  // namespace

TEST_CASE("parameter plan: the walk is the built model's named_parameters, in order", "[plan]") {
  for (const auto& [what, c] : configs()) {
    INFO(what << ": " << config_summary(c));
    const Transformer<float> model = Transformer<float>::to_be_loaded(c);
    std::vector<std::pair<std::string, Shape>> planned;
    std::vector<ParameterRole> roles;
    std::vector<bool> experts;
    ParameterPlan(c).for_each([&](const std::string& name, const PlannedParameter& p) {
      planned.push_back({name, p.shape});
      roles.push_back(p.role);
      experts.push_back(p.expert);
    });
    const std::vector<NamedParameter<float>>& built = model.named_parameters();
    CHECK(planned.size() == built.size());
    for (std::size_t i = 0; i < std::min(planned.size(), built.size()); ++i) {
      INFO("parameter " << i << ": planned " << planned[i].first << " "
                        << shape_str(planned[i].second) << ", built " << built[i].name << " "
                        << built[i].tensor.shape_string());
      REQUIRE(planned[i].first == built[i].name);
      REQUIRE(planned[i].second == built[i].tensor.shape());
      CHECK(to_string(roles[i]) == to_string(role_by_name(built[i].name)));
      CHECK(experts[i] == (built[i].name.find(".moe.experts.") != std::string::npos));
    }
  }
}

TEST_CASE("parameter plan: totals and count_parameters are the built model's", "[plan]") {
  for (const auto& [what, c] : configs()) {
    INFO(what << ": " << config_summary(c));
    const Transformer<float> model = Transformer<float>::to_be_loaded(c);
    const ParameterPlan plan(c);
    CHECK(plan.scalars() == static_cast<long double>(model.parameter_count()));
    CHECK(plan.tensors() == static_cast<long double>(model.named_parameters().size()));
    CHECK(plan.moe_layers() == c.moe_layers());
    CHECK(plan.dense_layers() + plan.moe_layers() == c.layers);
    const ParameterCounts counted = count_parameters(c), built = counts_of(model);
    CHECK(counted.total() == model.parameter_count());
    CHECK(counted.token_embedding == built.token_embedding);
    CHECK(counted.position_embedding == built.position_embedding);
    CHECK(counted.attention_q == built.attention_q);
    CHECK(counted.attention_kv == built.attention_kv);
    CHECK(counted.attention_out == built.attention_out);
    CHECK(counted.qk_norm == built.qk_norm);
    CHECK(counted.temperature == built.temperature);
    CHECK(counted.feed_forward == built.feed_forward);
    CHECK(counted.router == built.router);
    CHECK(counted.norms == built.norms);
    CHECK(counted.unembedding == built.unembedding);
    CHECK(counted.inactive_experts == built.inactive_experts);
    CHECK(counted.active() == built.total() - built.inactive_experts);
  }
}

// The guards read the totals of configs no one could build: they come from one block of each
// kind, not from a walk of every layer, and do not overflow.
TEST_CASE("parameter plan: the totals of a config of 2^24 layers, without walking them", "[plan]") {
  TransformerConfig c;  // rms norms, no biases, RoPE, an untied head, SwiGLU experts
  c.norm = NormKind::rms_norm;
  c.positions = PositionKind::rope;
  c.mlp = MlpKind::swiglu;
  c.mlp_bias = false;
  c.tie_embeddings = false;
  c.layers = std::size_t{1} << 24;
  c.moe_every = 2;
  c.experts = std::size_t{1} << 16;
  c.experts_top_k = 2;
  c.d_model = c.mlp_hidden = c.vocab = std::size_t{1} << 24;
  c.heads = 1;
  const ParameterPlan plan(c);
  // a dense layer: 2 norms (D), Wq Wk Wv Wo (D x D), gate up down (D x D); an MoE layer the
  // router (D x E) and E experts in place of the one
  const long double D = 0x1p24L, L = 0x1p24L, E = 0x1p16L;
  const long double dense = 2 * D + 4 * D * D + 3 * D * D;
  const long double moe = 2 * D + 4 * D * D + D * E + E * 3 * D * D;
  const long double outside = D * D + D + D * D;  // tok_emb, norm_f, head
  const long double scalars = outside + L / 2 * dense + L / 2 * moe;
  CHECK(double(plan.scalars()) == Approx(double(scalars)).epsilon(1e-15));
  CHECK(plan.tensors() == 3 + L / 2 * (2 + 4 + 3) + L / 2 * (2 + 4 + 1 + E * 3));
  CHECK(plan.moe_layers() == L / 2);
}

// find() looks a full name up in its layer's block without walking the layers: every
// planned name is found with its shape, and names the model lacks are not (an index past
// the layers or the experts, one written otherwise than fmt writes it, an expert's name in a
// dense layer, a dense layer's feed-forward in an MoE one).
TEST_CASE("parameter plan: find gives each parameter by its full name, and no other", "[plan]") {
  for (const auto& [what, c] : configs()) {
    INFO(what);
    const ParameterPlan plan(c);
    plan.for_each([&](const std::string& name, const PlannedParameter& p) {
      INFO(name);
      const PlannedParameter* found = plan.find(name);
      REQUIRE(found);
      CHECK(found->shape == p.shape);
      CHECK(to_string(found->role) == to_string(p.role));
    });
  }
  TransformerConfig c = from_preset("llama");
  c.layers = 4;
  c.experts = 3;
  c.experts_top_k = 2;
  c.moe_every = 2;  // layers 1 and 3 have experts
  const ParameterPlan plan(c);
  CHECK(plan.find("blocks.1.moe.experts.2.up.weight"));
  CHECK(plan.find("blocks.0.mlp.up.weight"));
  CHECK(plan.find("tok_emb.weight"));
  CHECK(plan.find("norm_f.weight"));
  for (const char* absent :
       {"blocks.4.attn.Wq", "blocks.01.attn.Wq", "blocks.-1.attn.Wq", "blocks..attn.Wq",
        "blocks.1", "blocks.1.", "blocks.18446744073709551616.attn.Wq",
        "blocks.99999999999999999999999.attn.Wq", "blocks.1.moe.experts.3.up.weight",
        "blocks.1.moe.experts.01.up.weight", "blocks.0.moe.experts.0.up.weight",
        "blocks.1.mlp.up.weight", "blocks.0.moe.router.weight", "attn.Wq", "up.weight",
        "blocks.0.tok_emb.weight", "pos_emb.weight", "", "blocks.", "head"}) {
    INFO(absent);
    CHECK_FALSE(plan.find(absent));
  }
}
