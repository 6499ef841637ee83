// The checkpoint schema (nn/io/checkpoint.hpp): each field of nn/config.hpp is required exactly
// from the format that introduced it and takes its `old` value in older files; a file newer
// than this build or an unknown config entry is an error naming it; a real file of every
// format so far (tests/fixtures/checkpoints/formatN/) loads; tools/checkpoint_schema.json,
// which tools/to_torch.py reads, is this build's schema.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "json_file.hpp"
#include "nn/io/checkpoint.hpp"
#include "nn/io/checkpoint_schema.hpp"
#include "nn/io/npz.hpp"
#include "nn/transformer.hpp"
#include "nn/io/training_state.hpp"
#include "run_program.hpp"
#include "test_paths.hpp"
#ifdef TAPEGRAD_WITH_EXAMPLES
#include "tasks/tasks.hpp"
#endif

using namespace tapegrad;
namespace fs = std::filesystem;

namespace {

const std::string kPrefix = kConfigPrefix;

NpzEntry int64_entry(const std::string& key, std::int64_t v) {
  xt::xarray<std::int64_t> a = xt::xarray<std::int64_t>::from_shape(std::vector<std::size_t>{});
  a.data()[0] = v;
  return NpzEntry(kPrefix + key, std::move(a));
}

// A configuration that differs from the defaults in fields of every format.
TransformerConfig modern_config() {
  TransformerConfig c = llama_preset();
  c.vocab = 11;
  c.context = 8;
  c.d_model = 16;
  c.heads = 4;
  c.kv_heads = 2;
  c.layers = 1;
  c.window = 3;
  c.qk_norm = true;
  c.qk_norm_gain = 2.5;
  c.learned_temperature = true;
  c.attention_scale = 0.5;
  c.seed = 77;
  return c;
}

// config_entries(c) as a file of `format` would hold them: the fields it predates left out.
std::vector<NpzEntry> entries_of_format(const TransformerConfig& c, int format) {
  std::vector<NpzEntry> out = {int64_entry("format", format)};
  for (const NpzEntry& e : config_entries(c)) {
    const std::string key = e.name.substr(kPrefix.size());
    if (key == "format") continue;
    for (const FieldInfo& f : config_fields())
      if (key == f.name && f.since <= format) out.push_back(e);
  }
  return out;
}

std::vector<NpzEntry> without(std::vector<NpzEntry> entries, const std::string& field) {
  std::vector<NpzEntry> out;
  for (NpzEntry& e : entries)
    if (e.name != kPrefix + field) out.push_back(std::move(e));
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// "line N: <a> | <b>" for the first line where a and b differ, "" when they are equal.
std::string first_difference(const std::string& a, const std::string& b) {
  std::istringstream in_a(a), in_b(b);
  std::string line_a, line_b;
  for (int n = 1;; ++n) {
    const bool more_a = static_cast<bool>(std::getline(in_a, line_a));
    const bool more_b = static_cast<bool>(std::getline(in_b, line_b));
    if (!more_a && !more_b) return "";
    if (more_a != more_b || line_a != line_b)
      return "line " + std::to_string(n) + ": " + (more_a ? line_a : "(end)") + " | " +
             (more_b ? line_b : "(end)");
  }
}

fs::path fixtures(int format) {
  return fs::path(TAPEGRAD_FIXTURES_DIR) / "checkpoints" / ("format" + std::to_string(format));
}

}  // namespace

TEST_CASE("checkpoint schema: the format written is the newest format a field declares",
          "[checkpoint][schema]") {
  int newest = 0;
  for (const FieldInfo& f : config_fields()) {
    // an execution field is never stored: no format holds it
    CHECK(f.since >= (f.role == FieldRole::execution ? 0 : 1));
    CHECK((f.role == FieldRole::execution) == (f.since == 0));
    newest = std::max(newest, f.since);
  }
  CHECK(kCheckpointFormat == newest);
  const std::vector<NpzEntry> entries = config_entries(modern_config());
  REQUIRE(find_npz_entry(entries, kPrefix + "format") != nullptr);
  CHECK(find_npz_entry(entries, kPrefix + "format")->as<std::int64_t>()() == kCheckpointFormat);
}

// What adding a field relies on: a file written before the field existed (a format below
// its `since`) lacks it and reads as the model it was, with the field at its `old` value;
// a file of the field's format or later without it is refused, naming it.
TEST_CASE("checkpoint schema: each field is required from its format on and old before it",
          "[checkpoint][schema]") {
  const TransformerConfig c = modern_config();
  const TransformerConfig older = config_before_fields();
  for (const FieldInfo& f : config_fields()) {
    INFO("field " << f.name << " (since format " << f.since << ")");
    if (f.role == FieldRole::execution) {  // not written, not required, not read
      CHECK(find_npz_entry(config_entries(c), kPrefix + f.name) == nullptr);
      continue;
    }
    CHECK_THROWS_WITH(config_from_entries(without(config_entries(c), f.name), "mem"),
                      Catch::Contains(kPrefix + f.name) && Catch::Contains("missing"));
    if (f.since == 1) continue;
    const int format = f.since - 1;
    const std::vector<NpzEntry> old_file = entries_of_format(c, format);
    REQUIRE(find_npz_entry(old_file, kPrefix + f.name) == nullptr);
    TransformerConfig expected = c;
    for (const FieldInfo& g : config_fields())
      if (g.since > format)
        set_field_from_string(expected, g.name, field_to_string(older, g.name));
    const TransformerConfig read = config_from_entries(old_file, "mem");
    CHECK(read == expected);
    CHECK(field_to_string(read, f.name) == field_to_string(older, f.name));
  }
}

TEST_CASE("checkpoint schema: the newest format's fields are optional only in older files",
          "[checkpoint][schema]") {
  const TransformerConfig c = modern_config();
  std::size_t newest_fields = 0;
  for (const FieldInfo& f : config_fields()) {
    if (f.since != kCheckpointFormat) continue;
    ++newest_fields;
    std::vector<NpzEntry> lacking = without(config_entries(c), f.name);
    CHECK_THROWS_WITH(config_from_entries(lacking, "mem"),
                      Catch::Contains(f.name) && Catch::Contains("format " + std::to_string(f.since)));
    for (NpzEntry& e : lacking)
      if (e.name == kPrefix + "format") e = int64_entry("format", kCheckpointFormat - 1);
    const TransformerConfig read = config_from_entries(lacking, "mem");
    CHECK(field_to_string(read, f.name) == field_to_string(config_before_fields(), f.name));
  }
  CHECK(newest_fields > 0);
}

TEST_CASE("checkpoint schema: an older file that holds a later field is read with it",
          "[checkpoint][schema]") {
  // format-2 files written just before format 3 hold the temperature flag and the gain
  const TransformerConfig c = modern_config();
  std::vector<NpzEntry> entries = config_entries(c);
  for (NpzEntry& e : entries)
    if (e.name == kPrefix + "format") e = int64_entry("format", 2);
  CHECK(config_from_entries(entries, "mem") == c);
}

TEST_CASE("checkpoint schema: a newer format, format 0 and an unknown config entry are refused",
          "[checkpoint][schema]") {
  const std::vector<NpzEntry> entries = config_entries(modern_config());
  std::vector<NpzEntry> newer = without(entries, "format");
  newer.push_back(int64_entry("format", kCheckpointFormat + 1));
  CHECK_THROWS_WITH(config_from_entries(newer, "new.npz"),
                    Catch::Contains("new.npz") &&
                        Catch::Contains("format " + std::to_string(kCheckpointFormat + 1)) &&
                        Catch::Contains("newer than this build"));
  std::vector<NpzEntry> zero = without(entries, "format");
  zero.push_back(int64_entry("format", 0));
  CHECK_THROWS_WITH(config_from_entries(zero, "zero.npz"), Catch::Contains("format 0"));
  std::vector<NpzEntry> unknown = entries;
  unknown.push_back(int64_entry("attn_softcap_from_the_future", 1));
  CHECK_THROWS_WITH(config_from_entries(unknown, "u.npz"),
                    Catch::Contains("__config__.attn_softcap_from_the_future") &&
                        Catch::Contains("not a field"));
  // what the programs store beside the fields is not a field, and is no error
  std::vector<NpzEntry> with_extras = entries;
  for (const char* extra : kConfigExtras) with_extras.push_back(int64_entry(extra, 1));
  CHECK(config_from_entries(with_extras, "mem") == modern_config());
}

#ifdef TAPEGRAD_WITH_EXAMPLES
TEST_CASE("checkpoint schema: the entries the programs store beside the fields are the extras",
          "[checkpoint][schema]") {
  CHECK(std::string(tasks::kTaskKey) == kPrefix + kConfigExtras[0]);
  CHECK(std::string(tasks::kVocabKey) == kPrefix + kConfigExtras[1]);
  CHECK(std::string(tasks::kTokenizerKey) == kPrefix + kConfigExtras[2]);
}
#endif

TEST_CASE("checkpoint schema: a real file of every format so far loads", "[checkpoint][schema]") {
  for (int format = 1; format <= kCheckpointFormat; ++format) {
    INFO("format " << format << ": " << fixtures(format).string()
                   << " (tests/fixtures/checkpoints/README.md says how each was written)");
    REQUIRE(fs::is_directory(fixtures(format)));
    std::size_t files = 0;
    for (const fs::directory_entry& d : fs::directory_iterator(fixtures(format))) {
      if (d.path().extension() != ".npz") continue;
      ++files;
      const std::string path = d.path().string();
      INFO(path);
      const std::vector<NpzEntry> entries = load_npz(path);
      REQUIRE(find_npz_entry(entries, kPrefix + "format") != nullptr);
      CHECK(find_npz_entry(entries, kPrefix + "format")->as<std::int64_t>()() == format);
      const Transformer<float> model = load_checkpoint<float>(path);
      CHECK(model.parameter_count() == count_parameters(model.config()).total());
      Transformer<double> widened(model.config());
      load_checkpoint(path, widened);
    }
    CHECK(files > 0);
  }
}

TEST_CASE("checkpoint schema: tools/checkpoint_schema.json is this build's schema",
          "[checkpoint][schema]") {
  const std::string path = std::string(TAPEGRAD_SOURCE_DIR) + "/tools/checkpoint_schema.json";
  INFO("regenerate it: build/tools/checkpoint_schema > tools/checkpoint_schema.json");
  const std::string generated = checkpoint_schema_json();
  CHECK(first_difference(read_text(path), generated) == "");
  const nlohmann::json schema = nlohmann::json::parse(generated);
  CHECK(schema.at("format") == kCheckpointFormat);
  REQUIRE(schema.at("fields").size() == config_fields().size());
  for (std::size_t i = 0; i < config_fields().size(); ++i) {
    CHECK(schema["fields"][i].at("name") == config_fields()[i].name);
    CHECK(schema["fields"][i].at("since") == config_fields()[i].since);
  }
  CHECK(schema["fields"][0].at("default") == 0);  // vocab
  // the training state's entry a reader must interpret: the precision, by its names
  const nlohmann::json& training = schema.at("training");
  CHECK(training.at("prefix") == kTrainingPrefix);
  CHECK(training.at("format") == kTrainingFormat);
  REQUIRE(training.at("entries").size() == 1);
  const nlohmann::json& precision = training["entries"][0];
  CHECK(precision.at("name") == "precision");
  CHECK(precision.at("since") == kPrecisionSince);
  CHECK(precision.at("old") == "f32");
  CHECK(precision.at("choices") == nlohmann::json(matmul_precision_names()));
  // the names' order is the enum's: the entry holds the index
  CHECK(precision["choices"][std::size_t(MatmulPrecision::bf16)] == "bf16");
}

// What each fixture's command line set (tests/fixtures/checkpoints/README.md), read back.
TEST_CASE("checkpoint schema: each fixture holds the model its command line described",
          "[checkpoint][schema]") {
  const TransformerConfig v2 = read_checkpoint_config((fixtures(2) / "sort_llama.npz").string());
  CHECK(v2.positions == PositionKind::rope);
  CHECK(v2.rope_style == RopeStyle::interleaved);
  CHECK(v2.norm == NormKind::rms_norm);
  CHECK(v2.mlp == MlpKind::swiglu);
  CHECK(v2.heads == 4);
  CHECK(v2.kv_heads == 2);
  CHECK(v2.window == 6);
  CHECK(v2.qk_norm);
  CHECK(v2.tie_embeddings);
  CHECK(v2.seed == 4);
  CHECK(v2.qk_norm_gain == 1.0);  // format 3's fields, at their old values
  CHECK_FALSE(v2.learned_temperature);
  // a format-2 file that holds format 3's fields anyway: they are read
  const TransformerConfig v2b =
      read_checkpoint_config((fixtures(2) / "reverse_llama_temperature.npz").string());
  CHECK(v2b.learned_temperature);
  CHECK(v2b.qk_norm_gain == 0.5);
  const TransformerConfig v3 =
      read_checkpoint_config((fixtures(3) / "sort_llama_temperature.npz").string());
  CHECK(v3.learned_temperature);
  CHECK(v3.qk_norm_gain == 2.0);
  CHECK(v3.qk_norm);
  CHECK(v3.heads == 2);
  CHECK(v3.seed == 7);
  const TransformerConfig current =
      read_checkpoint_config((fixtures(3) / "reverse_rope_tied.npz").string());
  CHECK(current.head_dim == 6);
  CHECK(current.mlp_hidden == 20);
  CHECK(current.rope_scaling == RopeScaling::linear);
  CHECK(current.rope_factor == 2.0);
  CHECK(current.tie_embeddings);
  REQUIRE(current.attention_scale.has_value());
  CHECK(*current.attention_scale == 1.0);
  CHECK(current.attn_softcap == 0.0);  // format 4's fields, at their old values
  CHECK(current.final_softcap == 0.0);
  const TransformerConfig v4 =
      read_checkpoint_config((fixtures(4) / "sort_alibi_softcaps.npz").string());
  CHECK(v4.positions == PositionKind::alibi);
  CHECK(v4.attn_softcap == 1.0);
  CHECK(v4.final_softcap == 2.0);
  CHECK(v4.seed == 11);
  CHECK(v4.experts == 0);  // format 5's fields, at their old values: dense
  CHECK(v4.moe_every == 1);
  const TransformerConfig v5 =
      read_checkpoint_config((fixtures(5) / "sort_mixtral_every2.npz").string());
  CHECK(v5.experts == 4);
  CHECK(v5.experts_top_k == 2);
  CHECK(v5.moe_renorm);
  CHECK(v5.moe_every == 2);
  CHECK(v5.moe_capacity == 0.0);
  CHECK(v5.layers == 2);
  CHECK(v5.seed == 13);
  // by hand: vocab 11, d 16, SwiGLU hidden 64 (3,072 a MLP), QK-norm (the sort recipe):
  // 2 x 11 x 16 + 2 x 768 attention + 32 QK-norm + 80 norms + 3,072 dense + 4 x 3,072 + 64
  CHECK(count_parameters(v5).total() == 17424);
  CHECK(count_parameters(v5).active() == 11280);
  CHECK_FALSE(v5.attn_qkv_bias);  // format 6's fields, at their old values
  CHECK_FALSE(v5.attn_out_bias);
  const TransformerConfig v6 =
      read_checkpoint_config((fixtures(6) / "sort_gpt2_attention_biases.npz").string());
  CHECK(v6.attn_qkv_bias);
  CHECK(v6.attn_out_bias);
  CHECK(v6.seed == 17);
  // the biases add 3 x 16 (q, k, v) + 16 (o) to the same model without them
  const Transformer<float> m6 =
      load_checkpoint<float>((fixtures(6) / "sort_gpt2_attention_biases.npz").string());
  TransformerConfig no_biases = v6;
  no_biases.attn_qkv_bias = no_biases.attn_out_bias = false;
  CHECK(m6.parameter_count() == count_parameters(no_biases).total() + 64);
  CHECK(m6.has_parameter("blocks.0.attn.bq"));
  CHECK(m6.has_parameter("blocks.0.attn.bo"));
  CHECK(v6.norm == NormKind::layer_norm);  // format 7's fields, at their old values
  CHECK_FALSE(v6.embed_norm);
  CHECK_FALSE(v6.post_norms);
  CHECK(v6.window_pattern == 0);
  CHECK(v6.query_scale == 0.0);
  const TransformerConfig gemma = read_checkpoint_config((fixtures(7) / "sort_gemma2.npz").string());
  CHECK(gemma.norm == NormKind::gemma);
  CHECK(gemma.mlp == MlpKind::geglu);
  CHECK(gemma.post_norms);
  CHECK(gemma.embed_scale);
  CHECK(gemma.window == 8);  // half the sort task's context of 16
  CHECK(gemma.window_pattern == 2);
  CHECK(gemma.kv_heads == 1);
  CHECK(gemma.seed == 19);
  // by hand: tied 11 x 16; per layer 768 attention (Wk, Wv 16 x 8), GeGLU 3 x 16 x 64,
  // four norms of 16; the final norm
  CHECK(count_parameters(gemma).total() == 176 + 2 * (768 + 3072 + 64) + 16);
  const TransformerConfig bloom = read_checkpoint_config((fixtures(7) / "sort_bloom.npz").string());
  CHECK(bloom.positions == PositionKind::alibi);
  CHECK(bloom.embed_norm);
  CHECK(bloom.attn_qkv_bias);
  CHECK(bloom.seed == 23);
  // tied 11 x 16; attention 4 x 256 + 4 x 16 biases; GELU 2 x 1024 + 64 + 16 biases; four
  // LayerNorms of 32 (two in the block, the final one, the embeddings')
  const Transformer<float> m7 = load_checkpoint<float>((fixtures(7) / "sort_bloom.npz").string());
  CHECK(m7.parameter_count() == 176 + 1088 + 2128 + 4 * 32);
  CHECK(m7.has_parameter("embed_norm.bias"));
}

#if defined(TAPEGRAD_TRAIN_BIN)
// The weights load as they were trained: evaluating each fixture with this build's trainer
// gives the held-out loss that the run which wrote it reported.
TEST_CASE("checkpoint schema: every fixture evaluates to the loss its own run reported",
          "[checkpoint][schema][train_cli]") {
  const fs::path dir = tapegrad::test::scratch_dir("test_checkpoint_schema", "eval");
  const std::vector<std::pair<std::string, double>> runs = {
      {"format1/reverse_rms_unscaled.npz", 2.3447716236114502},
      {"format2/sort_llama.npz", 1.923166036605835},
      {"format2/reverse_llama_temperature.npz", 2.3410236835479736},
      {"format3/sort_llama_temperature.npz", 1.9890196323394775},
      {"format3/reverse_rope_tied.npz", 2.356590509414673},
      {"format4/sort_alibi_softcaps.npz", 1.958663821220398},
      {"format5/sort_mixtral_every2.npz", 1.939475178718567},
      {"format6/sort_gpt2_attention_biases.npz", 2.0291640758514404},
      {"format7/sort_gemma2.npz", 2.2235937118530273},
      {"format7/sort_bloom.npz", 2.0630950927734375},
      {"format7/reverse_bloom.npz", 2.3607447147369385},
  };
  for (const auto& [file, reported] : runs) {
    INFO(file);
    const fs::path out = dir / fs::path(file).stem();
    const tapegrad::test::ProgramRun r = tapegrad::test::run_program(
        TAPEGRAD_TRAIN_BIN,
        "--resume '" + (fs::path(TAPEGRAD_FIXTURES_DIR) / "checkpoints" / file).string() +
            "' --steps 0 --eval-size 50 --threads 1 --quiet --out '" + out.string() + "'",
        dir);
    INFO(r.err);
    REQUIRE(r.code == 0);
    const double loss = tapegrad::test::field(tapegrad::test::read_json(out / "metrics.json"),
                                              "eval_loss").get<double>();
    CHECK(loss == Approx(reported).epsilon(1e-6));
  }
}
#endif
