// tools/to_torch.py end to end: trained gpt2 and llama checkpoints, and random models for
// every switch, give tapegrad's logits (within 1e-5 of the largest) and loss (within 1e-6 of it)
// in the torch module; weights trained further in torch come back into tapegrad with the
// torch module's logits; the RoPE pairing is part of the saved configuration, and reading
// the same weights with the other pairing changes the logits; misuse exits 2 with one line
// and writes nothing, and an input that is not a model's weights (NaN in a weight, a
// training checkpoint, a text file) is named for what it is. Needs /usr/bin/python3 with torch and numpy (scripts/install-deps.sh
// --test installs python3-torch).
#if defined(TAPEGRAD_TRAIN_BIN) && defined(TAPEGRAD_LOGITS_BIN)
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "autograd/tape.hpp"
#include "helpers.hpp"
#include "nn/io/checkpoint.hpp"
#include "run_program.hpp"
#include "test_paths.hpp"

namespace fs = std::filesystem;
using namespace tapegrad;
using tapegrad::test::ProgramRun;

namespace {

const std::string kPython = "/usr/bin/python3";
const std::string kToTorch = std::string(TAPEGRAD_SOURCE_DIR) + "/tools/to_torch.py";

fs::path scratch(const std::string& name) {
  return tapegrad::test::scratch_dir("test_to_torch", name);
}
std::string sh_arg(const fs::path& p) { return "'" + p.string() + "'"; }

void require_torch() {
  INFO("the test needs /usr/bin/python3 with torch: scripts/install-deps.sh --test");
  REQUIRE(std::system((kPython + " -c 'import torch, numpy' >/dev/null 2>&1").c_str()) == 0);
}

ProgramRun to_torch(const std::string& args, const fs::path& dir) {
  return tapegrad::test::run_program(
      kPython, sh_arg(kToTorch) + " --logits-bin '" + TAPEGRAD_LOGITS_BIN + "' " + args, dir);
}

// Every "check ..." line's numbers: the logits' difference relative to the largest logit,
// and the loss difference. Read from the output rather than trusting the tool's verdict.
struct Agreement {
  double logits_relative, loss_relative;
};
std::vector<Agreement> agreements(const std::string& out) {
  static const std::regex line(R"(= ([0-9.e+-]+) of max \|logit\|.*\|diff\| [0-9.e+-]+ = ([0-9.e+-]+) of the loss)");
  std::vector<Agreement> found;
  for (std::sregex_iterator it(out.begin(), out.end(), line), end; it != end; ++it)
    found.push_back({std::stod((*it)[1]), std::stod((*it)[2])});
  return found;
}
void require_agreement(const ProgramRun& r, std::size_t models) {
  INFO(r.out << r.err);
  REQUIRE(r.code == 0);
  const std::vector<Agreement> found = agreements(r.out);
  REQUIRE(found.size() == models);
  for (const Agreement& a : found) {
    CHECK(a.logits_relative <= 1e-5);
    CHECK(a.loss_relative <= 1e-6);
  }
}

// A short training run of the trainer: the weights have moved well away from their
// initialisation, so attention is sharp and every part matters to the logits.
fs::path train(const std::string& name, const std::string& args) {
  const fs::path dir = scratch(name);
  const ProgramRun r = tapegrad::test::run_program(
      TAPEGRAD_TRAIN_BIN, args + " --steps 100 --batch 16 --eval-size 40 --skip-gradcheck "
                          "--threads 1 --quiet --out " + sh_arg(dir / "out"), dir);
  INFO(r.err);
  REQUIRE(r.code == 0);
  return dir / "out" / "model.npz";
}

// Weights of order one (the initialisation's 0.02 leaves attention nearly uniform, where a
// wrong position encoding would hardly show): every parameter from N(0, 0.3), norm gains
// around 1.
void spread_weights(Transformer<float>& model, std::uint64_t seed) {
  Generator gen(seed);
  for (const NamedParameter<float>& p : model.named_parameters()) {
    Array<float>& v = const_cast<Tensor<float>&>(p.tensor).value();
    const bool gain = v.dimension() == 1 && p.name.find("bias") == std::string::npos;
    const Array<float> r = Tensor<float>::randn(Shape(v.shape().begin(), v.shape().end()), gen,
                                                gain ? 1.0f : 0.0f, 0.3f).value();
    v = r;
  }
}

TransformerConfig small(TransformerConfig c) {
  c.vocab = 13;
  c.context = 12;
  c.d_model = 16;
  c.heads = 4;
  c.layers = 2;
  return c;
}

// Every switch at least once, each RoPE scaling with one of the two pairings.
std::vector<std::pair<std::string, TransformerConfig>> switch_configs() {
  std::vector<std::pair<std::string, TransformerConfig>> out;
  auto add = [&](const std::string& name, auto edit) {
    // the preset the name starts with ("gemma2_..."), llama for the rest
    std::string preset_name = name.substr(0, name.find('_'));
    if (preset_name != "gpt2" && preset_name != "gemma2" && preset_name != "bloom") preset_name = "llama";
    TransformerConfig c = small(preset(preset_name));
    edit(c);
    finish_preset(preset_name, c);
    out.emplace_back(name, c);
  };
  add("gpt2", [](TransformerConfig&) {});
  add("gpt2_tied_window_unscaled", [](TransformerConfig& c) {
    c.tie_embeddings = true;
    c.window = 3;
    c.attention_scale = 1.0;
  });
  add("llama_half", [](TransformerConfig&) {});
  add("llama_interleaved_linear_mqa", [](TransformerConfig& c) {
    c.rope_style = RopeStyle::interleaved;
    c.rope_scaling = RopeScaling::linear;
    c.rope_factor = 2;
    c.kv_heads = 1;
  });
  add("llama_half_ntk_qknorm_headdim", [](TransformerConfig& c) {
    c.rope_scaling = RopeScaling::ntk;
    c.rope_factor = 3;
    c.qk_norm = true;
    c.head_dim = 6;
  });
  add("llama_interleaved_llama3_window_tied", [](TransformerConfig& c) {
    c.rope_style = RopeStyle::interleaved;
    c.rope_scaling = RopeScaling::llama3;
    c.rope_factor = 8;
    // wavelengths 2 pi 50^(2i/8) = 6.3, 16.7, 44.4, 118 against the band [32/4, 32/1]: one
    // kept, one blended, two interpolated, so each branch of the scaling counts
    c.head_dim = 8;
    c.rope_theta = 50;
    c.rope_original_context = 32;
    c.window = 4;
    c.tie_embeddings = true;
  });
  add("llama_half_yarn_layernorm_bias", [](TransformerConfig& c) {
    c.rope_scaling = RopeScaling::yarn;
    c.rope_factor = 4;
    c.rope_original_context = 6;
    c.norm = NormKind::layer_norm;
    c.mlp_bias = true;
  });
  add("gpt2_attention_only", [](TransformerConfig& c) { c.mlp = MlpKind::none; });
  add("gpt2_attention_biases", [](TransformerConfig& c) {
    c.attn_qkv_bias = true;
    c.attn_out_bias = true;
  });
  add("llama_qkv_bias_gqa", [](TransformerConfig& c) { c.attn_qkv_bias = true; });
  // mixtures of experts: renormalised top 2 (Mixtral), top 1 and top 2 with the raw
  // probabilities (Switch: a torch module that renormalised would disagree), experts in
  // every second layer only, and GELU experts
  add("llama_experts4_top2", [](TransformerConfig& c) {
    c.experts = 4;
    c.experts_top_k = 2;
  });
  add("llama_experts4_top1_raw", [](TransformerConfig& c) {
    c.experts = 4;
    c.experts_top_k = 1;
    c.moe_renorm = false;
  });
  add("llama_experts3_top2_raw_every2", [](TransformerConfig& c) {
    c.experts = 3;
    c.experts_top_k = 2;
    c.moe_renorm = false;
    c.moe_every = 2;
  });
  add("gpt2_experts4_top2", [](TransformerConfig& c) {
    c.experts = 4;
    c.experts_top_k = 2;
    c.moe_aux_coef = 0;  // a training-only weight: converts whatever its value
  });
  // a capacity that drops tokens in training: inference is dropless, as the module is
  add("llama_experts4_top2_capacity", [](TransformerConfig& c) {
    c.experts = 4;
    c.experts_top_k = 2;
    c.moe_capacity = 0.5;
  });
  add("llama_attention_only", [](TransformerConfig& c) { c.mlp = MlpKind::none; });
  add("llama_no_positions_gelu", [](TransformerConfig& c) {
    c.positions = PositionKind::none;
    c.mlp = MlpKind::gelu;
    c.mlp_hidden = 40;
  });
  // six heads: the slopes of a power of two (4) and the two interleaved from the next (8);
  // caps small enough to bend the spread weights' scores and logits
  add("llama_alibi_softcaps_six_heads", [](TransformerConfig& c) {
    c.positions = PositionKind::alibi;
    c.heads = 6;
    c.head_dim = 4;
    c.attn_softcap = 0.5;
    c.final_softcap = 2.0;
  });
  // Gemma 2 (window 6 on layers 0 and 2, GeGLU, gemma norms on both sides, scaled
  // embeddings, soft-caps) with caps that bend the spread weights' scores, and BLOOM; then
  // their parts on other models
  add("gemma2", [](TransformerConfig& c) { c.layers = 4; });
  add("gemma2_caps_query_scale_mqa", [](TransformerConfig& c) {
    c.attn_softcap = 1.0;
    c.final_softcap = 3.0;
    c.query_scale = 0.125;
    c.kv_heads = 1;
    c.window = 3;
    c.window_pattern = 2;
  });
  add("bloom", [](TransformerConfig&) {});
  add("gpt2_post_norms_embed_norm_geglu", [](TransformerConfig& c) {
    c.post_norms = true;
    c.embed_norm = true;
    c.mlp = MlpKind::geglu;
  });
  add("llama_gemma_norm_embed_scale_untied_window_pattern3", [](TransformerConfig& c) {
    c.norm = NormKind::gemma;
    c.embed_scale = true;
    c.layers = 3;
    c.window = 2;
    c.window_pattern = 3;
  });
  return out;
}

// The model's float32 logits on a fixed batch, computed in this process.
Array<float> logits_of(const fs::path& checkpoint) {
  Transformer<float> model = load_checkpoint<float>(checkpoint.string());
  NoGradGuard no_grad;
  const Indices tokens = tapegrad::test::random_tokens(3, model.config().context,
                                                       model.config().vocab, 5);
  return model.forward(tokens).value();
}

double max_abs(const Array<float>& a) {
  double m = 0;
  for (float v : a) m = std::max(m, double(std::abs(v)));
  return m;
}

}  // namespace

TEST_CASE("to_torch: a trained gpt2 and a trained llama give tapegrad's logits and loss in torch",
          "[to_torch]") {
  require_torch();
  const fs::path gpt2 = train("gpt2", "--task sort --d-model 32 --heads 4 --layers 2");
  const fs::path llama = train("llama", "--task sort --arch llama --d-model 32 --heads 4 "
                                        "--layers 2 --qk-norm --rope-style interleaved");
  const fs::path dir = scratch("trained_check");
  require_agreement(to_torch(sh_arg(gpt2) + " " + sh_arg(llama) + " --check", dir), 2);
  const ProgramRun saved = to_torch(sh_arg(llama) + " --out " + sh_arg(dir / "model.pt"), dir);
  INFO(saved.err);
  REQUIRE(saved.code == 0);
  CHECK(fs::file_size(dir / "model.pt") > fs::file_size(llama) / 2);
}

TEST_CASE("to_torch: every preset and switch gives tapegrad's logits in torch", "[to_torch]") {
  require_torch();
  const fs::path dir = scratch("switches");
  std::string args;
  std::uint64_t seed = 10;
  const auto configs = switch_configs();
  for (const auto& [name, config] : configs) {
    Transformer<float> model(config);
    spread_weights(model, ++seed);
    save_checkpoint((dir / (name + ".npz")).string(), model);
    args += sh_arg(dir / (name + ".npz")) + " ";
  }
  require_agreement(to_torch(args + "--check", dir), configs.size());
}

TEST_CASE("to_torch: weights trained on in torch come back into tapegrad with torch's logits",
          "[to_torch]") {
  require_torch();
  const fs::path dir = scratch("back");
  Transformer<float> model(switch_configs()[5].second);  // interleaved llama3 RoPE, window, tied
  spread_weights(model, 3);
  save_checkpoint((dir / "model.npz").string(), model);
  REQUIRE(to_torch(sh_arg(dir / "model.npz") + " --out " + sh_arg(dir / "model.pt"), dir).code == 0);
  const ProgramRun trained = tapegrad::test::run_program(
      kPython, sh_arg(fs::path(TAPEGRAD_SOURCE_DIR) / "tests" / "torch_keep_training.py") + " " +
                   sh_arg(dir / "model.pt") + " " + sh_arg(dir / "trained.pt") + " 5", dir);
  INFO(trained.err);
  REQUIRE(trained.code == 0);
  require_agreement(to_torch(sh_arg(dir / "trained.pt") + " --to-npz " +
                                 sh_arg(dir / "back.npz") + " --check", dir), 1);
  // the weights did move in torch, so the agreement is not the first file's round trip
  const Array<float> before = logits_of(dir / "model.npz"), after = logits_of(dir / "back.npz");
  CHECK(max_abs(after - before) > 1e-3 * max_abs(before));
  CHECK(read_checkpoint_config((dir / "back.npz").string()) == model.config());
}

TEST_CASE("to_torch: the checkpoints of every format read as tapegrad reads them",
          "[to_torch]") {
  require_torch();
  const fs::path dir = scratch("formats"), fixtures = fs::path(TAPEGRAD_FIXTURES_DIR) / "checkpoints";
  std::string args;
  std::size_t files = 0;
  for (int format = 1; format <= kCheckpointFormat; ++format)
    for (const fs::directory_entry& d :
         fs::directory_iterator(fixtures / ("format" + std::to_string(format)))) {
      if (d.path().extension() != ".npz") continue;
      if (read_checkpoint_config(d.path().string()).learned_temperature) {
        // the torch module has no learned temperature: refused, naming the field
        const ProgramRun r = to_torch(sh_arg(d.path()) + " --out " + sh_arg(dir / "t.pt"), dir);
        CHECK(r.code == 2);
        CHECK_THAT(r.err, Catch::Contains("learned_temperature"));
        CHECK_FALSE(fs::exists(dir / "t.pt"));
        continue;
      }
      args += sh_arg(d.path()) + " ";
      ++files;
    }
  require_agreement(to_torch(args + "--check", dir), files);
  CHECK(files >= 3);
}

TEST_CASE("to_torch: the RoPE pairing is saved, and the other pairing changes the logits",
          "[to_torch]") {
  const fs::path dir = scratch("rope_style");
  TransformerConfig config = switch_configs()[2].second;  // llama, half pairing
  Transformer<float> model(config);
  spread_weights(model, 4);
  save_checkpoint((dir / "half.npz").string(), model);
  REQUIRE(read_checkpoint_config((dir / "half.npz").string()).rope_style == RopeStyle::half);
  // the same weights, read as Meta-style (interleaved) weights
  std::vector<NpzEntry> entries = load_npz((dir / "half.npz").string());
  for (NpzEntry& e : entries)
    if (e.name == std::string(kConfigPrefix) + "rope_style")
      e.as<std::int64_t>().data()[0] = static_cast<std::int64_t>(RopeStyle::interleaved);
  save_npz((dir / "interleaved.npz").string(), entries);
  REQUIRE(read_checkpoint_config((dir / "interleaved.npz").string()).rope_style ==
          RopeStyle::interleaved);
  const Array<float> right = logits_of(dir / "half.npz"), wrong = logits_of(dir / "interleaved.npz");
  CHECK(max_abs(wrong - right) > 0.05 * max_abs(right));
  // and a file without the entry is refused rather than read with a guessed pairing
  std::vector<NpzEntry> without;
  for (const NpzEntry& e : entries)
    if (e.name != std::string(kConfigPrefix) + "rope_style") without.push_back(e);
  save_npz((dir / "none.npz").string(), without);
  CHECK_THROWS_WITH(read_checkpoint_config((dir / "none.npz").string()),
                    Catch::Contains("rope_style"));
}

TEST_CASE("to_torch and logits: misuse exits 2 with one line and writes nothing", "[to_torch]") {
  require_torch();
  const fs::path dir = scratch("misuse");
  Transformer<float> model(switch_configs()[0].second);
  save_checkpoint((dir / "model.npz").string(), model);
  save_npz((dir / "not_a_model.npz").string(),
           {NpzEntry("x", xt::xarray<float>::from_shape({2}))});
  TransformerConfig tempered = switch_configs()[0].second;
  tempered.learned_temperature = true;  // no torch module has it: refused
  save_checkpoint((dir / "tempered.npz").string(), Transformer<float>(tempered));
  const std::string m = sh_arg(dir / "model.npz");
  const std::vector<std::string> cases = {
      sh_arg(dir / "tempered.npz") + " --out " + sh_arg(dir / "w.pt"),  // learned_temperature
      "",                                                          // no input
      sh_arg(dir / "missing.npz"),                                 // no such file
      sh_arg(dir / "not_a_model.npz") + " --out " + sh_arg(dir / "w.pt"),  // not a checkpoint
      m + " --to-npz " + sh_arg(dir / "w.npz"),                    // wrong direction
      m + " " + m + " --out " + sh_arg(dir / "w.pt"),              // two inputs, one output
      m + " --check --batch 0",                                    // empty batch
      m + " --bogus",                                              // unknown option
      m,                                                           // neither --out nor --check
  };
  for (const std::string& args : cases) {
    const ProgramRun r = to_torch(args, dir);
    INFO("to_torch.py " << args << "\n" << r.err);
    CHECK(r.code == 2);
    CHECK(tapegrad::test::count_lines(r.err) == 1);
    CHECK(r.out.empty());
    CHECK_FALSE(fs::exists(dir / "w.pt"));
    CHECK_FALSE(fs::exists(dir / "w.npz"));
  }
  const std::vector<std::string> logits_cases = {
      "--model " + m,                                               // no --tokens, --out
      "--model " + m + " --tokens " + sh_arg(dir / "not_a_model.npz") + " --out " +
          sh_arg(dir / "w.npz"),                                    // no tokens entry
  };
  for (const std::string& args : logits_cases) {
    const ProgramRun r = tapegrad::test::run_program(TAPEGRAD_LOGITS_BIN, args, dir);
    INFO("logits " << args << "\n" << r.err);
    CHECK(r.code == 2);
    CHECK(tapegrad::test::count_lines(r.err) == 1);
    CHECK_FALSE(fs::exists(dir / "w.npz"));
  }
}

TEST_CASE("to_torch: NaN weights, a training checkpoint and a text file are named as such",
          "[to_torch]") {
  require_torch();
  const fs::path dir = scratch("inputs");
  Transformer<float> model(switch_configs()[0].second);
  const std::string name = model.named_parameters()[0].name;
  const std::string shape = model.named_parameters()[0].tensor.shape_string();
  save_checkpoint((dir / "model.npz").string(), model);
  std::vector<NpzEntry> entries = load_npz((dir / "model.npz").string());
  for (NpzEntry& e : entries)
    if (e.name == name) std::get<xt::xarray<float>>(e.array).flat(5) = std::nanf("");
  save_npz((dir / "nan.npz").string(), entries);
  std::vector<NpzEntry> training = load_npz((dir / "model.npz").string());
  training.emplace_back("__train__.format", xt::xarray<std::int64_t>(1));
  save_npz((dir / "ckpt-00000100.npz").string(), training);
  std::ofstream(dir / "notes.npz") << "step 100: loss 1.2\n";

  const auto refused = [&](const std::string& input, const std::vector<std::string>& said) {
    const ProgramRun r = to_torch(sh_arg(dir / input) + " --out " + sh_arg(dir / "w.pt"), dir);
    INFO("to_torch.py " << input << "\n" << r.err);
    CHECK(r.code == 2);
    CHECK(tapegrad::test::count_lines(r.err) == 1);
    for (const std::string& s : said) CHECK(r.err.find(s) != std::string::npos);
    CHECK_FALSE(fs::exists(dir / "w.pt"));
  };
  refused("nan.npz", {"'" + name + "' " + shape + " holds nan at element 5", "--allow-nonfinite"});
  refused("ckpt-00000100.npz", {"a training checkpoint", "model.npz"});
  refused("notes.npz", {"not an .npz file"});

  // the escape converts the NaN as it is
  const ProgramRun r = to_torch(sh_arg(dir / "nan.npz") + " --allow-nonfinite --out " +
                                    sh_arg(dir / "w.pt"), dir);
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(fs::exists(dir / "w.pt"));
}

#endif
