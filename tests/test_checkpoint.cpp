// nn/io/checkpoint: round trips (bitwise values, equal config) and every way a file can fail
// to fit: wrong shape, missing or unexpected name, wrong dtype, no config, truncated or
// corrupted bytes. A failed load leaves the model untouched.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

#include "helpers.hpp"
#include "nn/io/checkpoint.hpp"
#include "nn/io/npz.hpp"
#include "temp_files.hpp"
#include "nn/transformer.hpp"

using namespace tapegrad;
using test::TempDir;
using test::same_parameters;
using test::read_bytes;
using test::write_bytes;
namespace fs = std::filesystem;

namespace {

TransformerConfig config(std::uint64_t seed = 5) {
  TransformerConfig c;
  c.vocab = 9;
  c.context = 5;
  c.d_model = 8;
  c.heads = 2;
  c.layers = 2;
  c.mlp_ratio = 3;
  c.seed = seed;
  return c;
}


// `call` throws a std::runtime_error whose message contains every one of `parts`.
void require_error(const std::function<void()>& call, const std::vector<std::string>& parts) {
  bool thrown = false;
  try {
    call();
  } catch (const std::runtime_error& e) {
    thrown = true;
    const std::string message = e.what();
    INFO("message: " << message);
    for (const std::string& part : parts) CHECK_THAT(message, Catch::Contains(part));
  }
  INFO("expected an error mentioning " << parts.front());
  CHECK(thrown);
}

}  // namespace

TEST_CASE("checkpoint round trip restores every value bitwise and the config", "[checkpoint]") {
  TempDir dir;
  TransformerConfig c = config(0xFFFFFFFFFFFFFFF0ull);  // a seed above 2^63 survives int64
  c.norm = NormKind::rms_norm;
  c.attention_scale = 1.0;
  c.attention_init = AttentionInit::variance_preserving;
  Transformer<float> model(c);
  // values no initialiser would produce, including a -0 and a denormal
  model.parameter("head.weight").value()(0, 0) = -0.0f;
  model.parameter("head.weight").value()(0, 1) = 1e-40f;
  const std::string path = dir.file("model.npz");
  save_checkpoint(path, model);

  Transformer<float> back = load_checkpoint<float>(path);
  CHECK(back.config() == c);
  CHECK(same_parameters(model, back));
  CHECK(std::signbit(back.parameter("head.weight").value()(0, 0)));

  TransformerConfig other = c;
  other.seed = 1;  // same architecture, different initial values
  Transformer<float> into(other);
  CHECK_FALSE(same_parameters(model, into));
  load_checkpoint(path, into);
  CHECK(same_parameters(model, into));

  // the file is a plain npz: parameter names and the config as keys
  const std::vector<NpzEntry> entries = load_npz(path);
  CHECK(find_npz_entry(entries, "blocks.1.attn.Wq") != nullptr);
  REQUIRE(find_npz_entry(entries, "__config__.attention_scale") != nullptr);
  CHECK(find_npz_entry(entries, "__config__.attention_scale")->as<double>()() == 1.0);
  CHECK(find_npz_entry(entries, "__config__.vocab")->as<std::int64_t>()() == 9);
}

TEST_CASE("checkpoint round trip in double with the default attention scale", "[checkpoint]") {
  TempDir dir;
  Transformer<double> model(config());
  save_checkpoint(dir.file("d.npz"), model);
  Transformer<double> back = load_checkpoint<double>(dir.file("d.npz"));
  CHECK(back.config() == config());
  CHECK_FALSE(back.config().attention_scale.has_value());
  CHECK(same_parameters(model, back));
  // saving over an existing checkpoint replaces it
  model.parameter("norm_f.weight").value()(0) = 3.0;
  save_checkpoint(dir.file("d.npz"), model);
  CHECK(load_checkpoint<double>(dir.file("d.npz")).parameter("norm_f.weight").value()(0) == 3.0);
}

TEST_CASE("checkpoint rejects a wrong shape and a different architecture", "[checkpoint]") {
  TempDir dir;
  Transformer<float> small(config());
  save_checkpoint(dir.file("small.npz"), small);
  TransformerConfig wide_config = config();
  wide_config.d_model = 16;
  Transformer<float> wide(wide_config);
  const Transformer<float> before = Transformer<float>(wide_config);
  require_error([&] { load_parameters(dir.file("small.npz"), wide); },
                {"small.npz", "tok_emb.weight", "shape (9,8) in the file but (9,16)"});
  require_error([&] { load_checkpoint(dir.file("small.npz"), wide); },
                {"small.npz", "differs", "d_model=8", "d_model=16"});
  CHECK(same_parameters(wide, before));  // nothing was written
}

TEST_CASE("checkpoint rejects a missing name and an unexpected one", "[checkpoint]") {
  TempDir dir;
  Transformer<float> model(config());
  std::vector<NpzEntry> entries = config_entries(model.config());
  for (const auto& p : model.named_parameters())
    if (p.name != "blocks.1.mlp.fc.bias") entries.emplace_back(p.name, xt::xarray<float>(p.tensor.value()));
  save_npz(dir.file("missing.npz"), entries);
  require_error([&] { load_checkpoint<float>(dir.file("missing.npz")); },
                {"missing.npz", "'blocks.1.mlp.fc.bias'", "(24)", "missing"});

  entries.emplace_back("blocks.1.mlp.fc.bias", xt::xarray<float>::from_shape({24}));
  entries.emplace_back("blocks.2.attn.Wq", xt::xarray<float>::from_shape({8, 8}));
  save_npz(dir.file("extra.npz"), entries);
  require_error([&] { load_checkpoint<float>(dir.file("extra.npz")); },
                {"extra.npz", "'blocks.2.attn.Wq'", "not a parameter"});
}

TEST_CASE("a float32 checkpoint loads into a double model, every value widened exactly",
          "[checkpoint]") {
  TempDir dir;
  Transformer<float> trained(config());
  save_checkpoint(dir.file("f32.npz"), trained);
  Transformer<double> fresh = load_checkpoint<double>(dir.file("f32.npz"));
  Transformer<double> into(config(7));  // another seed: every value must be overwritten
  load_checkpoint(dir.file("f32.npz"), into);
  const auto expected = trained.named_parameters();
  for (const Transformer<double>* model : {&fresh, &into}) {
    const auto got = model->named_parameters();
    REQUIRE(got.size() == expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO(got[i].name);
      REQUIRE(got[i].name == expected[i].name);
      const auto& want = expected[i].tensor.value();
      const auto& have = got[i].tensor.value();
      REQUIRE(have.size() == want.size());
      for (std::size_t j = 0; j < want.size(); ++j)
        REQUIRE(have.data()[j] == static_cast<double>(want.data()[j]));
    }
  }
}

TEST_CASE("checkpoint rejects a wrong dtype and a file without config", "[checkpoint]") {
  TempDir dir;
  Transformer<float> model(config());
  Transformer<double> wide(config());
  save_checkpoint(dir.file("f64.npz"), wide);
  require_error([&] { load_checkpoint<float>(dir.file("f64.npz")); },
                {"f64.npz", "tok_emb.weight", "float64 in the file but the model is float32"});
  save_checkpoint(dir.file("f32.npz"), model);
  save_parameters(dir.file("bare.npz"), model);  // parameters only
  require_error([&] { load_checkpoint<float>(dir.file("bare.npz")); },
                {"bare.npz", "missing config entry '__config__.format'"});
  // ... which load_parameters accepts
  Transformer<float> other(config(6));
  load_parameters(dir.file("bare.npz"), other);
  CHECK(same_parameters(model, other));

  std::vector<NpzEntry> entries = config_entries(model.config());
  for (auto& e : entries)
    if (e.name == "__config__.heads") e.array = xt::xarray<std::int64_t>{3};  // 8 % 3 != 0
  save_npz(dir.file("badconfig.npz"), entries);
  require_error([&] { read_checkpoint_config(dir.file("badconfig.npz")); },
                {"badconfig.npz", "invalid config", "heads=3"});
  for (auto& e : entries)
    if (e.name == "__config__.heads") e.array = xt::xarray<std::int64_t>{-2};
  save_npz(dir.file("negative.npz"), entries);
  require_error([&] { read_checkpoint_config(dir.file("negative.npz")); },
                {"negative.npz", "__config__.heads", "-2"});

  // a config claiming a giant model is refused before anything that size is allocated
  entries = config_entries(model.config());
  for (const auto& p : model.named_parameters())
    entries.emplace_back(p.name, xt::xarray<float>(p.tensor.value()));
  for (auto& e : entries)
    if (e.name == "__config__.d_model" || e.name == "__config__.vocab")
      e.array = xt::xarray<std::int64_t>{std::int64_t{1} << 24};
  save_npz(dir.file("giant.npz"), entries);
  require_error([&] { load_checkpoint<float>(dir.file("giant.npz")); },
                {"giant.npz", "the config describes", "parameters but the file holds"});

  // one attention-only layer whose four matrices hold 2^64 numbers each (d_model 2^16, heads
  // x head_dim 2^48), which a count in 64-bit integers wraps to 0, leaving 1,769,472 (below
  // the floor of 2^22 a guard lets through): counted in long double from the shapes, it is
  // refused too
  TransformerConfig wrapping = model.config();
  wrapping.layers = 1;
  wrapping.mlp = MlpKind::none;
  wrapping.d_model = std::size_t{1} << 16;
  wrapping.heads = wrapping.kv_heads = wrapping.head_dim = std::size_t{1} << 24;
  REQUIRE(count_parameters(wrapping).total() == 1769472);
  entries = config_entries(wrapping);
  save_npz(dir.file("wrapping.npz"), entries);
  require_error([&] { load_checkpoint<float>(dir.file("wrapping.npz")); },
                {"wrapping.npz", "the config describes", "parameters but the file holds"});
}

// The tensor guard counts from the config what the model will register: a file of the
// config alone, for models of more than 1024 tensors, names exactly that count.
TEST_CASE("checkpoint: the tensor guard counts every norm of gemma2 and bloom", "[checkpoint]") {
  TempDir dir;
  for (const char* arch : {"gpt2", "gemma2", "bloom"}) {
    TransformerConfig c = preset(arch);
    c.vocab = 5;
    c.context = 8;
    c.d_model = 4;
    c.heads = 2;
    c.layers = 130;
    finish_preset(arch, c);
    const std::size_t registered = Transformer<float>(c).named_parameters().size();
    REQUIRE(registered > 1024);
    INFO(arch);
    save_npz(dir.file("config_only.npz"), config_entries(c));
    require_error([&] { load_checkpoint<float>(dir.file("config_only.npz")); },
                  {fmt::format("the config describes {} parameter tensors but the file holds 0",
                               registered)});
  }
}

// Thousands of tiny layers, experts in every other one: the tensor guard counts both kinds
// from the parameter plan and refuses the file before any layer is built. The count here is
// the built models' own: four layers hold base + 2 (dense + MoE), two hold base + dense + MoE.
TEST_CASE("checkpoint: the tensor guard counts tiny MoE layers in every other layer", "[checkpoint]") {
  TempDir dir;
  TransformerConfig c;  // gpt2: LayerNorm, biased GELU experts
  c.vocab = 3;
  c.context = 4;
  c.d_model = 2;
  c.heads = 1;
  c.mlp_hidden = 1;
  c.experts = 8;
  c.experts_top_k = 2;
  c.moe_every = 2;
  const auto tensors_of = [&](std::size_t layers) {
    TransformerConfig small = c;
    small.layers = layers;
    return Transformer<float>::to_be_loaded(small).named_parameters().size();
  };
  const std::size_t two = tensors_of(2), pair = tensors_of(4) - two;
  c.layers = 16384;  // building these took minutes before the guard (fuzz/fuzz_checkpoint)
  const std::size_t described = two + (c.layers / 2 - 1) * pair;
  REQUIRE(described > 400000);
  save_npz(dir.file("config_only.npz"), config_entries(c));
  require_error([&] { load_checkpoint<float>(dir.file("config_only.npz")); },
                {fmt::format("the config describes {} parameter tensors but the file holds 0",
                             described)});
}

TEST_CASE("checkpoint rejects truncated corrupted and missing files", "[checkpoint]") {
  TempDir dir;
  Transformer<float> model(config());
  const std::string good = dir.file("good.npz");
  save_checkpoint(good, model);
  const std::string bytes = read_bytes(good);
  REQUIRE(bytes.size() > 1000);
  for (std::size_t keep : {std::size_t{0}, std::size_t{10}, bytes.size() / 2, bytes.size() - 1}) {
    INFO("truncated to " << keep << " of " << bytes.size() << " bytes");
    write_bytes(dir.file("cut.npz"), bytes.substr(0, keep));
    require_error([&] { load_checkpoint<float>(dir.file("cut.npz")); }, {"cut.npz"});
  }
  // flipped bytes inside an array's data: the zip's CRC catches them
  std::string damaged = bytes;
  for (std::size_t i = bytes.size() / 3; i < bytes.size() / 3 + 8; ++i) damaged[i] ^= 0x5a;
  write_bytes(dir.file("flipped.npz"), damaged);
  Transformer<float> target(config(9));
  const Transformer<float> untouched(config(9));
  require_error([&] { load_checkpoint(dir.file("flipped.npz"), target); }, {"flipped.npz"});
  CHECK(same_parameters(target, untouched));

  write_bytes(dir.file("text.npz"), "this is not a zip file at all");
  require_error([&] { load_checkpoint<float>(dir.file("text.npz")); }, {"text.npz"});
  require_error([&] { load_checkpoint<float>(dir.file("absent.npz")); }, {"absent.npz"});
  require_error([&] { save_checkpoint(dir.file("no/such/dir/x.npz"), model); }, {"x.npz"});
  // and the good file still loads
  CHECK(same_parameters(model, load_checkpoint<float>(good)));
}
