// nn/config: the one list of fields, what is derived from it (validation, equality,
// checkpoint entries, the printed summary), the presets, and the parameter and KV-cache
// counts from the configuration alone, checked against built models and against the
// parameter counts of the published Llama 3 8B shapes.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include <unistd.h>

#include "helpers.hpp"
#include "nn/io/checkpoint.hpp"
#include "nn/config.hpp"
#include "nn/kv_cache.hpp"
#include "nn/transformer.hpp"
#include "test_paths.hpp"

using namespace tapegrad;
using namespace tapegrad::test;

namespace {

// A value other than the default for each field, so a test can change any one field.
std::string other_value(const FieldInfo& f) {
  switch (f.kind) {
    case FieldInfo::Kind::flag: return "true" == field_to_string(TransformerConfig{}, f.name) ? "false" : "true";
    case FieldInfo::Kind::choice: return f.choices.at(1);
    case FieldInfo::Kind::optional_real: return "0.5";
    case FieldInfo::Kind::seed: return "12345678901234567890";
    case FieldInfo::Kind::real: return "0.25";
    case FieldInfo::Kind::size: return "3";
  }
  return "";
}

TransformerConfig sized(TransformerConfig c) {
  c.vocab = 11;
  c.context = 9;
  c.d_model = 16;
  c.heads = 4;
  c.layers = 2;
  return c;
}

}  // namespace

TEST_CASE("config: every field is declared once, with a doc, and the defaults are the gpt2 preset", "[config]") {
  std::set<std::string> names;
  for (const FieldInfo& f : config_fields()) {
    CHECK(names.insert(f.name).second);
    CHECK(std::string(f.doc).size() > 10);
    if (f.kind == FieldInfo::Kind::choice) CHECK(f.choices.size() >= 2);
  }
  for (const char* wanted : {"vocab", "context", "d_model", "layers", "heads", "kv_heads", "head_dim",
                             "norm", "norm_eps", "mlp", "mlp_hidden", "mlp_multiple", "positions",
                             "rope_theta", "rope_style", "rope_scaling", "rope_factor", "window",
                             "qk_norm", "tie_embeddings", "attention_scale", "seed"})
    CHECK(names.count(wanted) == 1);
  CHECK(gpt2_preset() == TransformerConfig{});
  const TransformerConfig g = gpt2_preset();
  CHECK(g.positions == PositionKind::learned);
  CHECK(g.norm == NormKind::layer_norm);
  CHECK(g.mlp == MlpKind::gelu);
  CHECK(g.mlp_bias);
  CHECK(g.resolved_kv_heads() == g.heads);
  CHECK_FALSE(g.tie_embeddings);
}

TEST_CASE("config: text round-trips and any one changed field breaks equality", "[config]") {
  for (const FieldInfo& f : config_fields()) {
    INFO(f.name);
    TransformerConfig c;
    set_field_from_string(c, f.name, other_value(f));
    CHECK(field_to_string(c, f.name) != field_to_string(TransformerConfig{}, f.name));
    CHECK(c != TransformerConfig{});
    TransformerConfig back;
    set_field_from_string(back, f.name, field_to_string(c, f.name));
    CHECK(back == c);
  }
}

TEST_CASE("config: bad values and combinations name the field", "[config]") {
  TransformerConfig c = sized(gpt2_preset());
  c.heads = 6;
  c.d_model = 24;
  c.kv_heads = 4;
  require_shape_error([&] { c.validate(); }, {"config", "heads=6 is not divisible by kv_heads=4"});
  c.kv_heads = 12;
  require_shape_error([&] { c.validate(); }, {"config", "kv_heads=12", "heads=6"});
  TransformerConfig r = sized(llama_preset());
  r.head_dim = 5;
  require_shape_error([&] { r.validate(); }, {"config", "rope", "head_dim=5"});
  TransformerConfig s = sized(llama_preset());
  s.rope_scaling = RopeScaling::linear;
  require_shape_error([&] { set_field_from_string(s, "rope_factor", "0"); }, {"config", "rope_factor=0"});
  require_shape_error([&] { set_field_from_string(s, "rope_factor", "-2"); }, {"config", "rope_factor=-2"});
  require_shape_error([&] { set_field_from_string(s, "norm", "batch"); }, {"config", "norm=batch", "layer, rms"});
  require_shape_error([&] { set_field_from_string(s, "heads", "-1"); }, {"config", "heads=-1"});
  require_shape_error([&] { set_field_from_string(s, "heads", "0"); }, {"config", "heads=0"});
  require_shape_error([&] { set_field_from_string(s, "attention_scale", "nan"); }, {"config", "attention_scale"});
  require_shape_error([&] { set_field_from_string(s, "bogus", "1"); }, {"config", "bogus"});
  require_shape_error([&] { preset("mistral"); }, {"config", "unknown preset 'mistral'", "gpt2, gpt_neo, llama"});
  TransformerConfig y = sized(llama_preset());
  y.rope_scaling = RopeScaling::yarn;  // needs original_context
  require_shape_error([&] { y.validate(); }, {"original_context"});
  TransformerConfig zero;
  require_shape_error([&] { zero.validate(); }, {"config", "vocab=0"});
  // soft-caps float32 cannot compute c * tanh(s / c) with (inf * 0, or a cap that rounds to 0)
  for (const char* field : {"attn_softcap", "final_softcap"})
    for (const char* cap : {"1e39", "1e-44"}) {
      TransformerConfig capped = sized(gpt2_preset());
      set_field_from_string(capped, field, cap);
      require_shape_error([&] { capped.validate(); },
                          {"config", std::string(field) + "=", "must be 0 (off) or in"});
    }
  // a number a double cannot hold is named as such, not as "not a number"
  require_shape_error([&] { set_field_from_string(s, "attn_softcap", "1e-320"); },
                      {"config", "attn_softcap=1e-320", "within a double's range"});
  require_shape_error([&] { set_field_from_string(s, "attn_softcap", "1e400"); },
                      {"config", "attn_softcap=1e400", "within a double's range"});
}

TEST_CASE("config: the llama preset swaps every part of the 2017 model", "[config]") {
  TransformerConfig c = llama_preset();
  c.heads = 4;
  finish_preset("llama", c);
  CHECK(c.positions == PositionKind::rope);
  CHECK(c.rope_style == RopeStyle::half);
  CHECK(c.rope_theta == 10000.0);
  CHECK(c.norm == NormKind::rms_norm);
  CHECK(c.mlp == MlpKind::swiglu);
  CHECK_FALSE(c.mlp_bias);
  CHECK_FALSE(c.tie_embeddings);
  CHECK(c.kv_heads == 2);
  // SwiGLU's hidden width: int(2 * 4d / 3) rounded up to a multiple of 32
  c.d_model = 128;
  CHECK(c.resolved_mlp_hidden() == 352);  // 2*512/3 = 341 -> 352
  c.d_model = 4096;
  CHECK(c.resolved_mlp_hidden() == 10944);  // 10922 -> 10944
  c.mlp_multiple = 256;
  CHECK(c.resolved_mlp_hidden() == 11008);  // Llama 2 7B's width
}

TEST_CASE("config: checkpoint entries round-trip every field", "[config][checkpoint]") {
  TransformerConfig c = sized(llama_preset());
  c.kv_heads = 2;
  c.qk_norm = true;
  c.window = 5;
  c.rope_scaling = RopeScaling::llama3;
  c.rope_factor = 8;
  c.rope_original_context = 8;
  c.attention_scale = 1.0;
  c.seed = 0xfedcba9876543210ULL;
  c.attention_init = AttentionInit::variance_preserving;
  c.checkpoint_activations = true;  // an execution field: not stored, read as its default
  const std::vector<NpzEntry> entries = config_entries(c);
  std::size_t stored = 0;
  for (const FieldInfo& f : config_fields()) stored += f.role != FieldRole::execution;
  CHECK(stored == config_fields().size() - 1);
  CHECK(entries.size() == stored + 1);  // + format
  TransformerConfig expected = c;
  expected.checkpoint_activations = false;
  CHECK(config_from_entries(entries, "mem") == expected);
  // a field that the format written holds may not be missing
  std::vector<NpzEntry> missing;
  for (const NpzEntry& e : entries)
    if (e.name != "__config__.kv_heads") missing.push_back(e);
  REQUIRE_THROWS_WITH(config_from_entries(missing, "mem"),
                      Catch::Contains("__config__.kv_heads") && Catch::Contains("missing"));
}

TEST_CASE("config: checkpoints of format 2 (before the temperature and the QK-norm gain) still load", "[config][checkpoint]") {
  const auto format_entry = [](std::int64_t format) {
    xt::xarray<std::int64_t> a = xt::xarray<std::int64_t>::from_shape(std::vector<std::size_t>{});
    a.data()[0] = format;
    return NpzEntry("__config__.format", std::move(a));
  };
  TransformerConfig c = sized(llama_preset());
  c.qk_norm = true;
  std::vector<NpzEntry> format2;
  for (const NpzEntry& e : config_entries(c))
    if (e.name != "__config__.qk_norm_gain" && e.name != "__config__.learned_temperature")
      format2.push_back(e.name == "__config__.format" ? format_entry(2) : e);
  const TransformerConfig read = config_from_entries(format2, "mem");
  CHECK(read == c);
  CHECK(read.qk_norm_gain == 1.0);
  CHECK_FALSE(read.learned_temperature);
  // the same entries claiming format 3 lack a field that format requires
  for (NpzEntry& e : format2)
    if (e.name == "__config__.format") e = format_entry(3);
  REQUIRE_THROWS_WITH(config_from_entries(format2, "mem"),
                      Catch::Contains("qk_norm_gain") && Catch::Contains("missing"));
}

TEST_CASE("config: checkpoints of format 1 (before the modern fields) still load", "[config][checkpoint]") {
  const std::string dir = std::string(TAPEGRAD_FIXTURES_DIR) + "/checkpoints/format1/";
  const TransformerConfig a = read_checkpoint_config(dir + "sort_gpt2.npz");
  CHECK(a.d_model == 16);
  CHECK(a.heads == 2);
  CHECK(a.layers == 1);
  CHECK(a.seed == 3);
  CHECK(a.positions == PositionKind::learned);
  CHECK(a.resolved_kv_heads() == 2);
  CHECK(a.mlp == MlpKind::gelu);
  const TransformerConfig b = read_checkpoint_config(dir + "reverse_rms_unscaled.npz");
  CHECK(b.norm == NormKind::rms_norm);
  REQUIRE(b.attention_scale.has_value());
  CHECK(*b.attention_scale == 1.0);
  Transformer<float> model = load_checkpoint<float>(dir + "reverse_rms_unscaled.npz");
  CHECK(model.config() == b);
  CHECK(model.parameter_count() == count_parameters(b).total());
}

TEST_CASE("config: count_parameters equals the built model for every part", "[config]") {
  std::vector<TransformerConfig> configs;
  configs.push_back(sized(gpt2_preset()));
  TransformerConfig l = sized(llama_preset());
  finish_preset("llama", l);
  configs.push_back(l);
  TransformerConfig v = l;
  v.qk_norm = true;
  v.tie_embeddings = true;
  v.kv_heads = 1;
  v.head_dim = 6;
  v.mlp_bias = true;
  v.attn_qkv_bias = true;  // with GQA and head_dim != d_model/heads: bq and bk differ in width
  configs.push_back(v);
  TransformerConfig n = sized(gpt2_preset());
  n.positions = PositionKind::none;
  n.norm = NormKind::rms_norm;
  n.mlp_hidden = 20;
  n.mlp_bias = false;
  n.attn_out_bias = true;
  configs.push_back(n);
  for (const char* name : {"gemma2", "bloom"}) {  // post norms; the embeddings' norm
    TransformerConfig p = sized(preset(name));
    finish_preset(name, p);
    configs.push_back(p);
  }
  TransformerConfig a = sized(gemma2_preset());  // post norms without a second sub-layer
  a.mlp = MlpKind::none;
  a.embed_norm = true;
  configs.push_back(a);
  for (const TransformerConfig& c : configs) {
    INFO(config_summary(c));
    Transformer<float> model(c);
    CHECK(model.parameter_count() == count_parameters(c).total());
  }
}

TEST_CASE("config: each layer's plan fills every default, and the model, its caches and the "
          "exporters read it", "[config]") {
  TransformerConfig c = preset("llama");
  c.d_model = 32;
  c.heads = 4;
  c.kv_heads = 0;
  c.layers = 4;
  c.vocab = 11;
  c.context = 16;
  // kv_heads 0 is one key/value head per query head; the head is d_model / heads wide; the
  // scale 1/sqrt(8) unless a field sets it, attention_scale before query_scale
  CHECK(c.layer_plan(0).attention.kv_heads == 4);
  CHECK(c.layer_plan(0).attention.head_dim == 8);
  CHECK(*c.layer_plan(0).attention.scale == 1 / std::sqrt(8.0));
  c.query_scale = 0.25;
  CHECK(*c.layer_plan(1).attention.scale == 0.25);
  c.attention_scale = 1.0;
  CHECK(*c.layer_plan(1).attention.scale == 1.0);
  c.attention_scale.reset();
  // Gemma 2's pattern: a window on layers 0 and 2, every earlier key on 1 and 3; experts on
  // every second layer
  c.window = 5;
  c.window_pattern = 2;
  c.experts = 3;
  c.experts_top_k = 2;
  c.moe_every = 2;
  const std::size_t windows[] = {5, 0, 5, 0}, experts[] = {0, 3, 0, 3};
  Transformer<double> model(c);
  KVCacheSet<double> caches(c, 1, 12);
  for (std::size_t l = 0; l < c.layers; ++l) {
    INFO("layer " << l);
    const LayerPlan plan = c.layer_plan(l);
    CHECK(plan.attention.window == windows[l]);
    CHECK(plan.experts == experts[l]);
    CHECK(plan.attention.causal);
    const AttentionSpec& built = model.blocks()[l].attention().spec();
    CHECK(to_string(built) == to_string(plan.attention));
    CHECK(caches[l].window() == windows[l]);
    CHECK(caches[l].capacity() == (windows[l] ? windows[l] : 12));
  }
}

TEST_CASE("config: the specification's 8B table, from the configuration alone", "[config]") {
  TransformerConfig c = llama_preset();
  c.vocab = 128256;
  c.context = 8192;
  c.d_model = 4096;
  c.layers = 32;
  c.heads = 32;
  c.kv_heads = 8;
  c.head_dim = 128;
  c.mlp_hidden = 14336;
  c.rope_theta = 500000;
  c.validate();
  const ParameterCounts p = count_parameters(c);
  // the published Llama 3 8B shapes (above), counted by hand: 8,030,261,248 in all
  CHECK(p.token_embedding == 525336576ULL);
  CHECK(p.attention_q == 536870912ULL);
  CHECK(p.attention_kv == 268435456ULL);
  CHECK(p.attention_out == 536870912ULL);
  CHECK(p.feed_forward == 5637144576ULL);
  CHECK(p.norms == 266240ULL);
  CHECK(p.unembedding == 525336576ULL);
  CHECK(p.position_embedding == 0);
  CHECK(p.total() == 8030261248ULL);
  CHECK(std::round(1000.0 * double(p.feed_forward) / double(p.total())) == 702);
  CHECK(kv_cache_bytes_per_token(c, 2) == 128 * 1024);
  c.kv_heads = 32;
  CHECK(kv_cache_bytes_per_token(c, 2) == 512 * 1024);
}

namespace {

// What a field that shapes the model changes: the parameter count and the training loss
// (cross-entropy plus the MoE terms) of the model built from c's seed, on fixed tokens.
std::pair<std::size_t, double> model_outcome(const TransformerConfig& c) {
  Transformer<double> model(c);
  const Indices x = random_tokens(2, c.context, c.vocab, 5), y = random_tokens(2, c.context, c.vocab, 6);
  return {model.parameter_count(), model.training_loss(x, y).total.item()};
}

std::optional<std::string> refusal_if_given(const TransformerConfig& c, const std::string& field) {
  return inapplicable_given_field(
      c, [&](const std::string& f) { return f == field; }, [](const std::string& f) { return f; });
}

TransformerConfig with(TransformerConfig c, const std::string& field, const std::string& value) {
  set_field_from_string(c, field, value);
  return c;
}

}  // namespace

// The table of conditions is checked against the models themselves: a field it refuses must
// change nothing in that configuration, and the same value must change the model once the
// condition holds (else the table names the wrong condition).
TEST_CASE("config: a field refused as inapplicable changes nothing, and changes the model where it applies", "[config]") {
  const TransformerConfig gpt2 = sized(gpt2_preset());
  TransformerConfig llama = sized(llama_preset());
  finish_preset("llama", llama);
  llama.head_dim = 8;  // four rotation frequencies, so each scaling field moves one
  const TransformerConfig linear = with(with(llama, "rope_scaling", "linear"), "rope_factor", "4");
  const TransformerConfig llama3 = with(with(linear, "rope_scaling", "llama3"), "rope_original_context", "4096");
  const TransformerConfig yarn = with(llama3, "rope_scaling", "yarn");
  const TransformerConfig moe = with(gpt2, "experts", "4");
  const TransformerConfig no_mlp = with(gpt2, "mlp", "none");
  struct Case {
    std::string field, value;
    TransformerConfig off, on;
    std::string refusal;
  };
  const std::vector<Case> cases = {
      {"rope_theta", "500", gpt2, llama, "rope_theta applies to positions=rope only, not positions=learned"},
      {"rope_style", "interleaved", with(llama, "positions", "alibi"), llama, "not positions=alibi"},
      {"rope_scaling", "linear", gpt2, with(llama, "rope_factor", "4"), "not positions=learned"},
      {"rope_factor", "2", llama, linear, "rope_factor applies to rope_scaling=linear, ntk, llama3 or yarn only, not rope_scaling=none"},
      {"rope_low_freq_factor", "0.5", linear, llama3, "rope_scaling=llama3 only, not rope_scaling=linear"},
      {"rope_high_freq_factor", "8", yarn, llama3, "rope_scaling=llama3 only, not rope_scaling=yarn"},
      {"rope_beta_fast", "2", llama3, yarn, "rope_scaling=yarn only, not rope_scaling=llama3"},
      {"rope_beta_slow", "0.01", linear, yarn, "rope_scaling=yarn only"},
      {"rope_original_context", "64", linear, llama3, "rope_scaling=llama3 or yarn only, not rope_scaling=linear"},
      {"qk_norm_gain", "2", gpt2, with(gpt2, "qk_norm", "true"), "qk_norm_gain applies to qk_norm=true only, not qk_norm=false"},
      {"experts_top_k", "3", gpt2, moe, "experts_top_k applies to experts > 0 only, not experts=0"},
      {"moe_renorm", "false", gpt2, moe, "not experts=0"},
      {"moe_aux_coef", "0.5", gpt2, moe, "not experts=0"},
      {"moe_z_coef", "0.5", gpt2, moe, "not experts=0"},
      {"moe_capacity", "0.5", gpt2, moe, "not experts=0"},
      {"moe_every", "2", gpt2, moe, "not experts=0"},
      {"mlp_hidden", "20", no_mlp, gpt2, "mlp_hidden applies to mlp=gelu, swiglu or geglu only, not mlp=none"},
      {"mlp_bias", "false", no_mlp, gpt2, "not mlp=none"},
      {"mlp_ratio", "2", with(gpt2, "mlp_hidden", "20"), gpt2, "mlp_ratio applies to mlp_hidden=0 only, not mlp_hidden=20"},
      {"mlp_multiple", "7", gpt2, llama, "mlp_multiple applies to mlp=swiglu or geglu only, not mlp=gelu"},
      {"mlp_multiple", "7", with(llama, "mlp_hidden", "20"), llama, "not mlp_hidden=20"},
      {"window_pattern", "2", gpt2, with(gpt2, "window", "3"), "window_pattern applies to window > 0 only, not window=0"},
      {"window_global_first", "true", with(gpt2, "window", "3"), with(with(gpt2, "window", "3"), "window_pattern", "2"),
       "window_global_first applies to window > 0 and window_pattern > 0 only, not window_pattern=0"},
      {"window_global_first", "true", gpt2, with(with(gpt2, "window", "3"), "window_pattern", "2"), "not window=0"},
      {"query_scale", "0.25", with(gpt2, "attention_scale", "1"), gpt2, "query_scale applies to attention_scale=default only, not attention_scale=1"},
  };
  std::set<std::string> covered;
  for (const Case& k : cases) {
    INFO(k.field << "=" << k.value << " where it does not apply: " << config_summary(k.off));
    const auto refusal = refusal_if_given(k.off, k.field);
    REQUIRE(refusal.has_value());
    CHECK_THAT(*refusal, Catch::Matchers::Contains(k.refusal));
    CHECK(model_outcome(with(k.off, k.field, k.value)) == model_outcome(k.off));
    INFO("where it applies: " << config_summary(k.on));
    CHECK_FALSE(refusal_if_given(k.on, k.field).has_value());
    CHECK(model_outcome(with(k.on, k.field, k.value)) != model_outcome(k.on));
    covered.insert(k.field);
  }
  // every field the table can refuse in these configurations has a case above
  for (const TransformerConfig& c : {gpt2, llama, linear, llama3, yarn, moe, no_mlp,
                                     with(gpt2, "attention_scale", "1")})
    for (const FieldInfo& f : config_fields())
      if (refusal_if_given(c, f.name)) {
        INFO(f.name << " refused in " << config_summary(c));
        CHECK(covered.count(f.name) == 1);
      }
  // fields no condition governs are never refused
  for (const char* always : {"d_model", "window", "attn_softcap", "positions", "experts", "mlp", "qk_norm"})
    CHECK_FALSE(refusal_if_given(gpt2, always).has_value());
}

TEST_CASE("config: the objective's weights may change on a built or loaded model, the architecture not",
          "[config][checkpoint]") {
  for (const FieldInfo& f : config_fields())
    if (std::string(f.name) == "moe_aux_coef" || std::string(f.name) == "moe_z_coef") {
      INFO(f.name);
      CHECK(f.role == FieldRole::objective);
    }
  TransformerConfig c = mixtral_preset();
  c.vocab = 7;
  c.context = 5;
  c.d_model = 8;
  c.heads = 2;
  c.layers = 1;
  c.experts = 2;
  Transformer<float> model(c);
  TransformerConfig other = c;
  other.moe_aux_coef = 0.5;
  other.experts = 4;  // not the objective's: stays
  model.set_objective(other);
  CHECK(model.config().moe_aux_coef == 0.5);
  CHECK(model.config().experts == 2);
  other.moe_z_coef = -1;
  CHECK_THROWS_WITH(model.set_objective(other), Catch::Contains("moe_z_coef"));
  CHECK(model.config().moe_z_coef == c.moe_z_coef);

  // a file whose objective differs loads into the model, which keeps its own weights
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tapegrad_objective_" + std::to_string(::getpid()) + ".npz")).string();
  save_checkpoint(path, Transformer<float>(c));
  load_checkpoint(path, model);
  CHECK(model.config().moe_aux_coef == 0.5);
  TransformerConfig wider = c;
  wider.experts = 3;
  Transformer<float> other_architecture(wider);
  CHECK_THROWS_WITH(load_checkpoint(path, other_architecture), Catch::Contains("experts=2"));
  std::filesystem::remove(path);
}
