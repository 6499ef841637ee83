// The training state of a checkpoint (nn/io/training_state) without the trainer: AdamW's
// state restored into a fresh optimiser continues the same arithmetic, a generator's state
// restores its stream, and the reader refuses every damaged field by name.
#include <catch2/catch.hpp>
#include <limits>
#include <string>
#include <vector>

#include "nn/io/checkpoint.hpp"
#include "nn/io/training_state.hpp"
#include "test_paths.hpp"

using namespace tapegrad;

namespace {

TransformerConfig tiny_config() {
  TransformerConfig c;
  c.vocab = 7;
  c.context = 5;
  c.d_model = 8;
  c.heads = 2;
  c.layers = 1;
  c.seed = 4;
  return c;
}

// n AdamW steps on the model's loss over fixed tokens.
void adam_steps(Transformer<float>& model, AdamW<float>& opt, int n) {
  Indices tokens = Indices::from_shape({2, 5});
  Indices targets = Indices::from_shape({2, 5});
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    tokens.data()[i] = std::int64_t(i % 7);
    targets.data()[i] = std::int64_t((i * 3 + 1) % 7);
  }
  for (int s = 0; s < n; ++s) {
    Tensor<float> loss = model.loss(tokens, targets, -100);
    loss.backward();
    opt.step();
    model.zero_grad();
  }
}

std::vector<float> values(const Transformer<float>& model) {
  std::vector<float> out;
  for (const auto& p : model.named_parameters())
    out.insert(out.end(), p.tensor.value().data(), p.tensor.value().data() + p.tensor.size());
  return out;
}

// A model and a state of 3 AdamW steps, as entries the reader checks.
struct Saved {
  Transformer<float> model{tiny_config()};
  std::vector<NpzEntry> entries;
  Saved() {
    AdamW<float> opt(model.parameters(), {1e-2, 0.9, 0.99, 1e-8, 0.1});
    adam_steps(model, opt, 3);
    TrainingState<float> s;
    s.step = 3;
    s.total_steps = 10;
    s.moments = collect_moments<float>(model, {&opt});
    Generator g(9);
    s.generators["data"] = generator_state(g);
    s.losses = {2.0, 1.9, 1.8};
    s.lrs = {0.01, 0.01, 0.01};
    s.integer_settings["batch"] = 8;
    entries = training_state_entries(s);
  }
  NpzEntry& entry(const std::string& name) {
    for (NpzEntry& e : entries)
      if (e.name == kTrainingPrefix + name) return e;
    FAIL("no entry " << name);
    return entries.front();
  }
};

std::string rejection(const std::vector<NpzEntry>& entries, const Transformer<float>& model) {
  try {
    training_state_from_entries<float>(entries, model, "f.npz");
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "<accepted>";
}

}  // namespace

TEST_CASE("training state: AdamW restored from its state takes the same steps bit for bit", "[resume]") {
  Transformer<float> a(tiny_config()), b(tiny_config());
  AdamW<float> opt_a(a.parameters(), {1e-2, 0.9, 0.99, 1e-8, 0.1});
  adam_steps(a, opt_a, 4);
  // b: the same 4 steps, then its parameters and moments go through the checkpoint entries
  // into a third model and a fresh optimiser.
  AdamW<float> opt_b(b.parameters(), {1e-2, 0.9, 0.99, 1e-8, 0.1});
  adam_steps(b, opt_b, 4);
  TrainingState<float> s;
  s.step = 4;
  s.total_steps = 8;
  s.moments = collect_moments<float>(b, {&opt_b});
  s.losses.assign(4, 1.0);
  s.lrs.assign(4, 1e-2);
  Transformer<float> c(tiny_config());
  for (std::size_t i = 0; i < c.named_parameters().size(); ++i) {
    Tensor<float> dst = c.named_parameters()[i].tensor;
    const Tensor<float>& src = b.named_parameters()[i].tensor;
    std::copy(src.value().data(), src.value().data() + src.size(), dst.value().data());
  }
  const TrainingState<float> read = training_state_from_entries<float>(training_state_entries(s), c, "mem");
  AdamW<float> opt_c(c.parameters(), {1e-2, 0.9, 0.99, 1e-8, 0.1});
  restore_moments<float>(read.moments, c, {&opt_c}, "mem");
  adam_steps(a, opt_a, 3);
  adam_steps(c, opt_c, 3);
  CHECK(values(a) == values(c));

  // The trap: the same weights with fresh moments (what a weights-only resume does) drift.
  Transformer<float> d(tiny_config());
  for (std::size_t i = 0; i < d.named_parameters().size(); ++i) {
    Tensor<float> dst = d.named_parameters()[i].tensor;
    const Tensor<float>& src = b.named_parameters()[i].tensor;
    std::copy(src.value().data(), src.value().data() + src.size(), dst.value().data());
  }
  AdamW<float> fresh(d.parameters(), {1e-2, 0.9, 0.99, 1e-8, 0.1});
  adam_steps(d, fresh, 3);
  CHECK(values(d) != values(a));
}

TEST_CASE("training state: a generator's state restores its stream", "[resume]") {
  Generator g(123);
  for (int i = 0; i < 1000; ++i) g.integer(97);
  const std::vector<std::uint64_t> words = generator_state(g);
  Generator h(5);
  restore_generator(h, words, "mem");
  for (int i = 0; i < 100; ++i) REQUIRE(g.integer(1u << 30) == h.integer(1u << 30));
  std::vector<std::uint64_t> short_state(words.begin(), words.end() - 1);
  CHECK_THROWS_WITH(restore_generator(h, short_state, "f.npz"), Catch::Contains("words"));
  std::vector<std::uint64_t> past_end = words;
  past_end.back() = 100000;  // the position within the state block
  CHECK_THROWS_AS(restore_generator(h, past_end, "f.npz"), CheckpointError);
}

TEST_CASE("training state: the reader refuses each damaged field, naming it", "[resume]") {
  {
    Saved s;
    CHECK(rejection(s.entries, s.model) == "<accepted>");
  }
  struct Case {
    const char* what;
    void (*damage)(Saved&);
    const char* named;
  };
  const Case cases[] = {
      {"a NaN first moment", [](Saved& s) { s.entry("m.tok_emb.weight").as<float>().data()[3] = std::numeric_limits<float>::quiet_NaN(); }, "m.tok_emb.weight"},
      {"a negative second moment", [](Saved& s) { s.entry("v.norm_f.weight").as<float>().data()[0] = -1.0f; }, "v.norm_f.weight"},
      {"a moment of the wrong shape", [](Saved& s) { s.entry("m.tok_emb.weight").array = xt::xarray<float>::from_shape({2, 2}); }, "m.tok_emb.weight"},
      {"a moment of the wrong dtype", [](Saved& s) { s.entry("v.tok_emb.weight").array = xt::xarray<double>::from_shape({7, 8}); }, "v.tok_emb.weight"},
      {"a step past the run", [](Saved& s) { s.entry("step").as<std::int64_t>().data()[0] = 11; }, "step"},
      {"a parameter stepped more often than the run", [](Saved& s) { s.entry("t.tok_emb.weight").as<std::int64_t>().data()[0] = 4; }, "t.tok_emb.weight"},
      {"a loss curve of the wrong length", [](Saved& s) { s.entry("loss").array = xt::xarray<double>{1.0, 2.0}; }, "loss"},
      {"a NaN loss", [](Saved& s) { s.entry("loss").as<double>().data()[1] = std::nan(""); }, "loss"},
      {"a moment for no parameter", [](Saved& s) { s.entries.emplace_back(std::string(kTrainingPrefix) + "m.nothing", xt::xarray<float>{1.0f}); }, "m.nothing"},
      {"an unknown entry", [](Saved& s) { s.entries.emplace_back(std::string(kTrainingPrefix) + "extra", xt::xarray<float>{1.0f}); }, "extra"},
      {"a missing moment", [](Saved& s) { s.entry("v.norm_f.weight").name = std::string(kTrainingPrefix) + "setting.x"; }, "v.norm_f.weight"},
      {"a generator state cut short", [](Saved& s) { s.entry("rng.data").array = xt::xarray<std::int64_t>{1, 2, 3}; }, "rng.data"},
      {"a format from the future", [](Saved& s) { s.entry("format").as<std::int64_t>().data()[0] = kTrainingFormat + 1; }, "format"},
      {"a precision that is none", [](Saved& s) { s.entry("precision").as<std::int64_t>().data()[0] = 2; }, "precision"},
      {"a precision of the wrong dtype", [](Saved& s) { s.entry("precision").array = xt::xarray<double>(1.0); }, "precision"},
      {"a state of the format that records the precision, without it", [](Saved& s) { s.entry("precision").name = std::string(kTrainingPrefix) + "setting.y"; }, "precision"},
      {"a setting that is not one value", [](Saved& s) { s.entry("setting.batch").array = xt::xarray<std::int64_t>{8, 8}; }, "setting.batch"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    Saved s;
    c.damage(s);
    const std::string why = rejection(s.entries, s.model);
    CHECK(why.find("checkpoint f.npz") == 0);
    CHECK(why.find(c.named) != std::string::npos);
  }
}

TEST_CASE("training state: the precision reads back, and a state written before it was recorded is f32",
          "[resume]") {
  Saved saved;
  CHECK(training_state_from_entries<float>(saved.entries, saved.model, "mem").precision ==
        MatmulPrecision::f32);
  saved.entry("precision").as<std::int64_t>().data()[0] = std::int64_t(MatmulPrecision::bf16);
  CHECK(training_state_from_entries<float>(saved.entries, saved.model, "mem").precision ==
        MatmulPrecision::bf16);
  // format 1 had no precision entry: the run it continues multiplied in f32
  std::vector<NpzEntry> old;
  for (NpzEntry& e : saved.entries)
    if (e.name != std::string(kTrainingPrefix) + "precision") old.push_back(e);
  for (NpzEntry& e : old)
    if (e.name == std::string(kTrainingPrefix) + "format") e.as<std::int64_t>().data()[0] = 1;
  CHECK(training_state_from_entries<float>(old, saved.model, "mem").precision == MatmulPrecision::f32);
}

TEST_CASE("training state: the format a file was written in reads back, for the caller's rules",
          "[resume]") {
  Saved saved;
  CHECK(training_state_from_entries<float>(saved.entries, saved.model, "mem").format == kTrainingFormat);
  saved.entry("format").as<std::int64_t>().data()[0] = kDataSettingsSince - 1;
  CHECK(training_state_from_entries<float>(saved.entries, saved.model, "mem").format ==
        kDataSettingsSince - 1);
}

TEST_CASE("training state: the fuzz seeds of a training checkpoint load with their state", "[resume][fuzz_corpus]") {
  // fuzz/corpus/checkpoint/training* (fuzz/make_corpus.cpp): the fuzzer starts from these,
  // so they must reach the training-state reader and pass it.
  const std::string dir = std::string(TAPEGRAD_SOURCE_DIR) + "/fuzz/corpus/checkpoint/";
  const std::string path = dir + "training.npz";
  Transformer<float> model = load_checkpoint<float>(path);
  const std::vector<NpzEntry> entries = load_npz(path);
  REQUIRE(holds_training_state(entries));
  const TrainingState<float> s = training_state_from_entries<float>(entries, model, path);
  CHECK(s.step == 2);
  CHECK(s.losses.size() == 2);
  CHECK(s.moments.size() == model.named_parameters().size());
  for (const auto& [name, st] : s.moments) {
    INFO(name);
    CHECK(st.step == 2);
  }
  CHECK(s.generators.count("data") == 1);
}
