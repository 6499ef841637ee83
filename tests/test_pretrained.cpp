// Hugging Face folders (nn/io/pretrained.hpp): save_pretrained then load_pretrained gives the
// model back bit for bit (float and double; GQA, MoE, tied and untied heads, biases, windows,
// Gemma 2 and BLOOM; BLOOM's fused query_key_value per head),
// an interleaved-RoPE model comes back as a half-RoPE one with the same logits; shards, the
// hub's unprefixed GPT-2 names and its mask buffers load; a missing, unexpected or
// wrong-shape tensor is refused naming it and its file; a refused save writes nothing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "autograd/tape.hpp"
#include "helpers.hpp"
#include "nn/io/hf_weights.hpp"
#include "nn/io/pretrained.hpp"
#include "nn/io/safetensors.hpp"
#include "temp_files.hpp"

using namespace tapegrad;
using namespace tapegrad::test;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

TransformerConfig sized(TransformerConfig c) {
  c.vocab = 13;
  c.context = 10;
  c.d_model = 12;
  c.heads = 3;
  c.layers = 2;
  c.mlp_hidden = 20;
  c.seed = 7;
  return c;
}

std::vector<std::pair<std::string, TransformerConfig>> configs() {
  std::vector<std::pair<std::string, TransformerConfig>> out;
  const TransformerConfig g = sized(gpt2_preset());
  TransformerConfig l = sized(llama_preset());
  l.heads = 4;
  l.kv_heads = 2;
  l.head_dim = 4;  // heads * head_dim != d_model
  out.push_back({"gpt2 without attention biases", g});
  TransformerConfig gb = g;
  gb.attn_qkv_bias = gb.attn_out_bias = true;
  gb.tie_embeddings = true;
  out.push_back({"gpt2 tied with biases", gb});
  out.push_back({"llama gqa untied", l});
  TransformerConfig t = l;
  t.tie_embeddings = true;
  t.rope_scaling = RopeScaling::llama3;
  t.rope_factor = 4;
  t.rope_original_context = 4;
  out.push_back({"llama tied llama3", t});
  TransformerConfig w = l;
  w.window = 3;
  out.push_back({"mistral window 3", w});
  TransformerConfig q = l;
  q.attn_qkv_bias = true;
  out.push_back({"qwen2 biases", q});
  TransformerConfig o = l;
  o.attn_out_bias = true;
  o.mlp_bias = true;
  out.push_back({"llama o and mlp biases", o});
  TransformerConfig m = l;
  m.experts = 3;
  m.experts_top_k = 2;
  out.push_back({"mixtral 3 experts", m});
  TransformerConfig g2 = sized(gemma2_preset());
  g2.layers = 3;
  g2.heads = 4;
  g2.kv_heads = 2;
  g2.head_dim = 4;
  g2.window = 4;
  g2.query_scale = 0.25;  // query_pre_attn_scalar 16
  out.push_back({"gemma2 window on layers 0 and 2", g2});
  TransformerConfig b = sized(bloom_preset());
  b.mlp_hidden = 4 * b.d_model;
  out.push_back({"bloom tied", b});
  b.tie_embeddings = false;
  out.push_back({"bloom untied", b});
  return out;
}

// Every parameter from N(0, 0.5) (norm gains around 1): the initialisation's zero biases
// and unit gains would hide a tensor written into the wrong place.
template <class T>
void spread(const Transformer<T>& model, std::uint64_t seed) {
  Generator gen(seed);
  for (const NamedParameter<T>& p : model.named_parameters()) {
    Tensor<T> t = p.tensor;
    const bool gain = p.name.find("norm") != std::string::npos && p.name.find(".weight") != std::string::npos;
    t.value() = Tensor<T>::randn(t.shape(), gen, T(gain ? 1 : 0), T(0.5)).value();
  }
}

template <class T>
Array<T> logits_of(Transformer<T>& model) {
  NoGradGuard no_grad;
  return model.forward(random_tokens(2, model.config().context, model.config().vocab, 3)).value();
}

template <class T>
bool same_bits(const Array<T>& a, const Array<T>& b) {
  return a.shape() == b.shape() && std::equal(a.begin(), a.end(), b.begin(), [](T x, T y) {
           return std::memcmp(&x, &y, sizeof(T)) == 0;
         });
}

template <class T>
double relative_error(const Array<T>& a, const Array<T>& b) {
  double err = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::abs(double(a.data()[i]) - double(b.data()[i])));
    scale = std::max(scale, std::abs(double(b.data()[i])));
  }
  return err / scale;
}

// Every parameter of `b` equals `a`'s of the same name, bit for bit; a parameter only one
// of them has must be zero (a bias written as zeros).
template <class T>
void check_same_parameters(const Transformer<T>& a, const Transformer<T>& b) {
  for (const NamedParameter<T>& p : b.named_parameters()) {
    INFO(p.name);
    if (a.has_parameter(p.name)) {
      CHECK(same_bits(a.parameter(p.name).value(), p.tensor.value()));
    } else {
      for (T v : p.tensor.value()) CHECK(v == T(0));
    }
  }
  for (const NamedParameter<T>& p : a.named_parameters()) CHECK(b.has_parameter(p.name));
}

// The folder's tensors as doubles, by name, and written back.
struct Held {
  std::vector<std::size_t> shape;
  std::vector<double> values;
};
std::map<std::string, Held> read_all(const std::string& path) {
  const SafetensorsFile file(path);
  std::map<std::string, Held> out;
  for (const SafetensorsTensor& t : file.tensors()) {
    Held h{t.shape, std::vector<double>(t.elements())};
    file.read(t.name, h.values.data());
    out[t.name] = h;
  }
  return out;
}
void write_all(const std::string& path, const std::map<std::string, Held>& tensors) {
  std::vector<SafetensorsSource<double>> sources;
  for (const auto& [name, h] : tensors) sources.emplace_back(name, h.shape, h.values.data());
  save_safetensors<double>(path, sources);
}

std::string refusal_of_load(const std::string& dir) {
  try {
    load_pretrained<double>(dir);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

template <class T>
void check_round_trips() {
  TempDir dir;
  std::uint64_t seed = 20;
  for (const auto& [name, config] : configs()) {
    INFO(name);
    Transformer<T> model(config);
    spread(model, ++seed);
    const std::string folder = dir.file(std::to_string(seed));
    save_pretrained(model, folder);
    CHECK(is_pretrained_folder(folder));
    PretrainedModel<T> loaded = load_pretrained<T>(folder);
    CHECK(hf_config_to_json(loaded.model.config()) == hf_config_to_json(config));
    check_same_parameters(model, loaded.model);
    CHECK(same_bits(logits_of(loaded.model), logits_of(model)));
    // the file holds what was saved: F32 for float, F64 for double
    const SafetensorsFile file(folder + "/model.safetensors");
    for (const SafetensorsTensor& t : file.tensors())
      CHECK(t.dtype == (std::is_same_v<T, float> ? "F32" : "F64"));
    CHECK(json::parse(read_bytes(folder + "/config.json")).at("torch_dtype") ==
          (std::is_same_v<T, float> ? "float32" : "float64"));
    CHECK((file.find("lm_head.weight") == nullptr) == config.tie_embeddings);
  }
}

}  // namespace

TEST_CASE("pretrained: save then load gives the float model back bit for bit", "[pretrained]") {
  check_round_trips<float>();
}

TEST_CASE("pretrained: save then load gives the double model back bit for bit", "[pretrained]") {
  check_round_trips<double>();
}

TEST_CASE("pretrained: an interleaved-RoPE model comes back half-RoPE with its logits", "[pretrained]") {
  TempDir dir;
  TransformerConfig c = configs()[2].second;  // llama gqa: 4 query heads over 2 K/V heads
  c.rope_style = RopeStyle::interleaved;
  c.attn_qkv_bias = true;  // q's and k's biases are permuted with their rows
  Transformer<double> model(c);
  spread(model, 3);
  save_pretrained(model, dir.file("a"));
  PretrainedModel<double> loaded = load_pretrained<double>(dir.file("a"));
  CHECK(loaded.model.config().rope_style == RopeStyle::half);
  CHECK(relative_error(logits_of(loaded.model), logits_of(model)) < 1e-13);
  // read as if its pairs were interleaved, the same weights give other logits
  TransformerConfig misread = loaded.model.config();
  misread.rope_style = RopeStyle::interleaved;
  Transformer<double> wrong(misread);
  for (const NamedParameter<double>& p : loaded.model.named_parameters()) {
    Tensor<double> t = wrong.parameter(p.name);
    t.value() = p.tensor.value();
  }
  CHECK(relative_error(logits_of(wrong), logits_of(model)) > 1e-3);
  // q and v: rows of q moved, those of v (no rotation) kept
  const Array<double>& wq = model.parameter("blocks.0.attn.Wq").value();
  const Array<double>& wq_half = loaded.model.parameter("blocks.0.attn.Wq").value();
  CHECK(wq_half(0, 1) == wq(0, 2));  // head 0: column 1 of the halves is interleaved pair 1's first
  CHECK(wq_half(0, 2) == wq(0, 1));  // column dh/2 = 2 is pair 0's second
  CHECK(same_bits(loaded.model.parameter("blocks.0.attn.Wv").value(),
                  model.parameter("blocks.0.attn.Wv").value()));
  // import, export, import: bit for bit
  save_pretrained(loaded.model, dir.file("b"));
  PretrainedModel<double> again = load_pretrained<double>(dir.file("b"));
  check_same_parameters(loaded.model, again.model);
}

TEST_CASE("pretrained: shards and the hub's gpt2 names load as the single file does", "[pretrained]") {
  TempDir dir;
  Transformer<double> model(configs()[1].second);  // gpt2, tied, biases
  spread(model, 5);
  save_pretrained(model, dir.file("single"));
  const std::map<std::string, Held> all = read_all(dir.file("single/model.safetensors"));

  // two shards and their index
  fs::create_directories(dir.file("sharded"));
  for (const char* f : {"config.json", "generation_config.json"})
    fs::copy_file(dir.file(std::string("single/") + f), dir.file(std::string("sharded/") + f));
  std::map<std::string, Held> first, second;
  json weight_map = json::object();
  for (const auto& [name, h] : all) {
    const bool early = name.find(".h.1.") == std::string::npos;
    (early ? first : second)[name] = h;
    weight_map[name] = early ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  write_all(dir.file("sharded/model-00001-of-00002.safetensors"), first);
  write_all(dir.file("sharded/model-00002-of-00002.safetensors"), second);
  write_bytes(dir.file("sharded/model.safetensors.index.json"),
              json({{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}).dump());
  PretrainedModel<double> sharded = load_pretrained<double>(dir.file("sharded"));
  check_same_parameters(model, sharded.model);

  // no `transformer.` prefix, and the causal-mask buffers older files carry
  fs::create_directories(dir.file("hub"));
  fs::copy_file(dir.file("single/config.json"), dir.file("hub/config.json"));
  std::map<std::string, Held> hub;
  for (const auto& [name, h] : all) hub[name.rfind("transformer.", 0) == 0 ? name.substr(12) : name] = h;
  hub["h.0.attn.bias"] = Held{{1, 1, 10, 10}, std::vector<double>(100, 1.0)};
  hub["h.0.attn.masked_bias"] = Held{{}, {-1e4}};
  write_all(dir.file("hub/model.safetensors"), hub);
  PretrainedModel<double> from_hub = load_pretrained<double>(dir.file("hub"));
  check_same_parameters(model, from_hub.model);
  CHECK(from_hub.model_type == "gpt2");
}

TEST_CASE("pretrained: a missing unexpected or wrong-shape tensor is refused naming it", "[pretrained]") {
  TempDir dir;
  TransformerConfig c = configs()[2].second;  // llama, untied
  Transformer<double> model(c);
  save_pretrained(model, dir.file("m"));
  const std::string file = dir.file("m/model.safetensors");
  const std::map<std::string, Held> all = read_all(file);

  std::map<std::string, Held> missing = all;
  missing.erase("model.layers.1.self_attn.k_proj.weight");
  write_all(file, missing);
  CHECK_THAT(refusal_of_load(dir.file("m")),
             Catch::Contains("tensor 'model.layers.1.self_attn.k_proj.weight' (8, 12) is missing") &&
                 Catch::Contains("load_pretrained " + dir.file("m")));

  std::map<std::string, Held> no_head = all;
  no_head.erase("lm_head.weight");
  write_all(file, no_head);
  CHECK_THAT(refusal_of_load(dir.file("m")),
             Catch::Contains("'lm_head.weight'") && Catch::Contains("tie_word_embeddings is false"));

  std::map<std::string, Held> extra = all;
  extra["model.layers.0.self_attn.q_norm.weight"] = Held{{4}, std::vector<double>(4, 1.0)};
  write_all(file, extra);
  CHECK_THAT(refusal_of_load(dir.file("m")),
             Catch::Contains(file) && Catch::Contains("'model.layers.0.self_attn.q_norm.weight'") &&
                 Catch::Contains("does not have"));

  std::map<std::string, Held> reshaped = all;
  reshaped["model.norm.weight"] = Held{{13}, std::vector<double>(13, 1.0)};
  write_all(file, reshaped);
  CHECK_THAT(refusal_of_load(dir.file("m")),
             Catch::Contains("'model.norm.weight' has shape (13), config.json describes (12)"));

  // a tied head is the embedding: a separate lm_head would be ignored by transformers
  json config = json::parse(read_bytes(dir.file("m/config.json")));
  config["tie_word_embeddings"] = true;
  write_bytes(dir.file("m/config.json"), config.dump());
  write_all(file, all);
  CHECK_THAT(refusal_of_load(dir.file("m")),
             Catch::Contains("'lm_head.weight'") && Catch::Contains("tie_word_embeddings is true"));

  // a config.json far larger than its weights: refused before the model is built
  config["tie_word_embeddings"] = false;
  config["num_hidden_layers"] = 1000000;
  config["hidden_size"] = 4096;
  config["intermediate_size"] = 14336;
  write_bytes(dir.file("m/config.json"), config.dump());
  CHECK_THAT(refusal_of_load(dir.file("m")),
             Catch::Contains("config.json describes a model of") && Catch::Contains("parameters, the "
                                                                                     "folder's tensors hold"));

  // thousands of tiny layers (fewer parameters than the size check's floor): refused by the
  // tensor count before any layer is built, not by the first missing tensor after all are
  config["num_hidden_layers"] = 3000;
  config["hidden_size"] = 12;
  config["intermediate_size"] = 16;
  write_bytes(dir.file("m/config.json"), config.dump());
  CHECK_THAT(refusal_of_load(dir.file("m")),
             Catch::Contains("config.json describes 3000 layers, whose llama model has 27003 "
                             "tensors; the folder holds 21"));

  // and a mixtral folder's: each layer's two norms, q k v o, the router and 3 experts' w1 w3
  // w2 (16 tensors), and outside them the embedding, the final norm and the head
  Transformer<double> mixtral(configs()[7].second);
  REQUIRE(mixtral.config().experts == 3);
  save_pretrained(mixtral, dir.file("moe"));
  json moe = json::parse(read_bytes(dir.file("moe/config.json")));
  REQUIRE(moe.at("model_type") == "mixtral");
  moe["num_hidden_layers"] = 1400;
  write_bytes(dir.file("moe/config.json"), moe.dump());
  CHECK_THAT(refusal_of_load(dir.file("moe")),
             Catch::Contains("config.json describes 1400 layers, whose mixtral model has 22403 "
                             "tensors; the folder holds 35"));

  CHECK_THAT(refusal_of_load(dir.file("nowhere")), Catch::Contains("not a folder holding config.json"));
  CHECK_FALSE(is_pretrained_folder(dir.file("nowhere")));
  CHECK_FALSE(is_pretrained_folder(file));
}

// Gemma 2's layers alternate windowed and global (window_pattern 2), which a model of one
// layer cannot be: the count comes from the config's own description, not from small models
// built to count, so it holds for this family too and refuses before any layer is built.
TEST_CASE("pretrained: thousands of gemma2 layers over a 3-layer folder are refused by the count", "[pretrained]") {
  TempDir dir;
  const auto& all = configs();
  const auto it = std::find_if(all.begin(), all.end(), [](const auto& c) {
    return c.first == "gemma2 window on layers 0 and 2";
  });
  REQUIRE(it != all.end());
  REQUIRE(it->second.window_pattern == 2);
  Transformer<double> model(it->second);
  save_pretrained(model, dir.file("g"));
  json config = json::parse(read_bytes(dir.file("g/config.json")));
  REQUIRE(config.at("model_type") == "gemma2");
  config["num_hidden_layers"] = 3000;
  write_bytes(dir.file("g/config.json"), config.dump());
  // each layer's four norms, q k v o and gate up down; the embedding and the final norm
  CHECK_THAT(refusal_of_load(dir.file("g")),
             Catch::Contains("config.json describes 3000 layers, whose gemma2 model has 33002 "
                             "tensors; the folder holds 35"));
}

// The description from the config alone (hf_tensor_specs, hf_tensor_count) is the built
// model's map (hf_tensors), name for name, shape for shape and part for part, for every
// family; and the count, from one layer of each kind, is the full list's length, with experts
// in every layer or every other one.
TEST_CASE("pretrained: the tensors described from the config are the built model's", "[pretrained]") {
  std::vector<std::pair<std::string, TransformerConfig>> all = configs();
  TransformerConfig every_other = all[7].second;  // mixtral's, experts in layers 1 and 3
  REQUIRE(every_other.experts == 3);
  every_other.layers = 4;
  every_other.moe_every = 2;
  for (const auto& [name, c] : all) {
    INFO(name);
    const std::string type = json::parse(hf_config_to_json(c)).at("model_type");
    const HfLayout layout = hf_layout(c, type);
    const std::vector<HfTensorSpec> specs = hf_tensor_specs(c, layout);
    const Transformer<float> model(c);
    const std::vector<HfTensor<float>> bound = hf_tensors(model, layout);
    REQUIRE(specs.size() == bound.size());
    std::size_t parts = 0;
    for (std::size_t i = 0; i < specs.size(); ++i) {
      CHECK(specs[i].name == bound[i].name);
      CHECK(specs[i].shape == bound[i].shape);
      CHECK(specs[i].elements() == bound[i].elements());
      for (const HfPart& p : specs[i].parts) parts += p.parameter.empty() ? 0 : 1;
    }
    CHECK(parts == model.named_parameters().size());  // each parameter in exactly one
    const HfTensorCount count = hf_tensor_count(c, layout);
    CHECK(count.total == specs.size());
    CHECK(count.smallest_layer * c.layers + 2 <= specs.size());
  }
  const HfLayout mixtral = hf_layout(every_other, "mixtral");
  const HfTensorCount count = hf_tensor_count(every_other, mixtral);
  CHECK(count.total == hf_tensor_specs(every_other, mixtral).size());
  // a dense layer: two norms, q k v o, w1 w3 w2; an MoE one the router and 3 experts' three
  CHECK(count.smallest_layer == 9);
  CHECK(count.total == 2 * 9 + 2 * (6 + 1 + 9) + 3);
}

TEST_CASE("pretrained: a model no model_type expresses is refused and nothing is written", "[pretrained]") {
  TempDir dir;
  TransformerConfig c = configs()[2].second;
  c.qk_norm = true;
  const Transformer<float> model(c);
  CHECK_THROWS_WITH(save_pretrained(model, dir.file("new")),
                    Catch::Contains("qk_norm=true") && Catch::Contains("hf_config_to_json"));
  CHECK_FALSE(fs::exists(dir.file("new")));
  fs::create_directories(dir.file("empty"));
  CHECK_THROWS_AS(save_pretrained(model, dir.file("empty")), CheckpointError);
  CHECK(fs::is_empty(dir.file("empty")));
}

TEST_CASE("pretrained: kept fields and generation_config.json", "[pretrained]") {
  TempDir dir;
  Transformer<float> model(configs()[2].second);
  save_pretrained(model, dir.file("m"), R"({"model_type": "mistral", "bos_token_id": 1, "eos_token_id": 2})");
  const PretrainedModel<float> loaded = load_pretrained<float>(dir.file("m"));
  CHECK(loaded.model_type == "mistral");
  const json kept = json::parse(loaded.kept_json);
  CHECK(kept.at("bos_token_id") == 1);
  CHECK(kept.at("torch_dtype") == "float32");
  const json generation = json::parse(read_bytes(dir.file("m/generation_config.json")));
  CHECK(generation.at("bos_token_id") == 1);
  CHECK(generation.at("eos_token_id") == 2);
}

TEST_CASE("pretrained: bloom's query_key_value is per head and loads without its prefix", "[pretrained]") {
  TempDir dir;
  const auto& configs_list = configs();
  const auto it = std::find_if(configs_list.begin(), configs_list.end(),
                               [](const auto& c) { return c.first == "bloom tied"; });
  REQUIRE(it != configs_list.end());
  Transformer<double> model(it->second);
  spread(model, 9);
  save_pretrained(model, dir.file("single"));
  const std::map<std::string, Held> all = read_all(dir.file("single/model.safetensors"));
  // (3d, d): row (3h + s) dh + j is head h's column j of q (s 0), k (s 1) or v (s 2)
  const TransformerConfig& c = model.config();
  const std::size_t D = c.d_model, dh = c.resolved_head_dim();
  const Held& fused = all.at("transformer.h.1.self_attention.query_key_value.weight");
  const Held& bias = all.at("transformer.h.1.self_attention.query_key_value.bias");
  REQUIRE(fused.shape == std::vector<std::size_t>{3 * D, D});
  for (std::size_t h = 0; h < c.heads; ++h)
    for (const auto& [s, part] : {std::pair{0, "q"}, std::pair{1, "k"}, std::pair{2, "v"}}) {
      const Array<double>& w = model.parameter(std::string("blocks.1.attn.W") + part).value();
      const Array<double>& b = model.parameter(std::string("blocks.1.attn.b") + part).value();
      for (std::size_t j = 0; j < dh; ++j) {
        const std::size_t row = (3 * h + s) * dh + j;
        CHECK(bias.values[row] == b(h * dh + j));
        for (std::size_t i = 0; i < D; ++i) CHECK(fused.values[row * D + i] == w(i, h * dh + j));
      }
    }
  // saved from BloomModel: no `transformer.` prefix
  fs::create_directories(dir.file("hub"));
  fs::copy_file(dir.file("single/config.json"), dir.file("hub/config.json"));
  std::map<std::string, Held> hub;
  for (const auto& [name, h] : all) hub[name.substr(std::string("transformer.").size())] = h;
  write_all(dir.file("hub/model.safetensors"), hub);
  PretrainedModel<double> from_hub = load_pretrained<double>(dir.file("hub"));
  CHECK(from_hub.model_type == "bloom");
  check_same_parameters(model, from_hub.model);
}

TEST_CASE("pretrained: a NaN or Inf weight is refused naming the tensor and the element", "[pretrained]") {
  TempDir dir;
  Transformer<double> model(configs()[2].second);  // llama, untied
  save_pretrained(model, dir.file("m"));
  const std::string file = dir.file("m/model.safetensors");
  std::map<std::string, Held> all = read_all(file);
  all["model.layers.1.mlp.up_proj.weight"].values[5] = std::nan("");
  write_all(file, all);
  CHECK_THAT(refusal_of_load(dir.file("m")),
             Catch::Contains("load_pretrained " + dir.file("m")) && Catch::Contains(file) &&
                 Catch::Contains("tensor 'model.layers.1.mlp.up_proj.weight' (20, 12) holds nan "
                                 "at element 5 (allow_nonfinite loads it anyway)"));
  const PretrainedModel<float> loaded = load_pretrained<float>(dir.file("m"), /*allow_nonfinite=*/true);
  CHECK(loaded.model_type == "llama");

  all["model.layers.1.mlp.up_proj.weight"].values[5] = 0;
  all["model.embed_tokens.weight"].values[0] = -HUGE_VAL;  // a tensor read straight into the model
  write_all(file, all);
  CHECK_THAT(refusal_of_load(dir.file("m")),
             Catch::Contains("tensor 'model.embed_tokens.weight' (13, 12) holds -inf at element 0"));
}

TEST_CASE("pretrained: a tied folder's stored head is taken when it is the embedding", "[pretrained]") {
  TempDir dir;
  TransformerConfig c = configs()[3].second;  // llama, tied
  Transformer<double> model(c);
  spread(model, 5);
  save_pretrained(model, dir.file("m"));
  const std::string file = dir.file("m/model.safetensors");
  std::map<std::string, Held> all = read_all(file);
  REQUIRE(all.count("lm_head.weight") == 0);
  all["lm_head.weight"] = all.at("model.embed_tokens.weight");  // as transformers may save it
  write_all(file, all);
  PretrainedModel<double> loaded = load_pretrained<double>(dir.file("m"));
  CHECK(same_bits(logits_of(loaded.model), logits_of(model)));

  all["lm_head.weight"].values[7] += 1e-9;
  write_all(file, all);
  CHECK_THAT(refusal_of_load(dir.file("m")),
             Catch::Contains("tensor 'lm_head.weight' differs from the embedding "
                             "'model.embed_tokens.weight' at element 7") &&
                 Catch::Contains("tie_word_embeddings is true") &&
                 Catch::Contains("set tie_word_embeddings to false"));
}

TEST_CASE("pretrained: a folder with pickled weights only says how to re-save them", "[pretrained]") {
  TempDir dir;
  save_pretrained(Transformer<float>(configs()[0].second), dir.file("m"));
  fs::rename(dir.file("m/model.safetensors"), dir.file("m/pytorch_model.bin"));
  CHECK_THAT(refusal_of_load(dir.file("m")),
             Catch::Contains("holds pytorch_model.bin but no model.safetensors") &&
                 Catch::Contains("pickled weights are not read") &&
                 Catch::Contains("save_pretrained(dir, safe_serialization=True)"));
}
