// Writes the generated part of fuzz/corpus/ (run from the repository root after building
// the fuzz targets: build-fuzz/make_corpus fuzz/corpus). The npz seeds are numpy's own
// files from tests/fixtures/npz, copied; this program adds what only tapegrad writes:
//   checkpoint/tiny.npz            a valid checkpoint of fuzz::existing_config()
//   checkpoint/tiny_*.rec          the same entries in the records format, with each flag
//   checkpoint/huge_config.rec     a config describing ~2^48 parameters (must be refused)
//   checkpoint/truncated.npz       tiny.npz cut in half
//   checkpoint/training.npz        tiny.npz plus a training state (nn/io/training_state) after
//                                  two AdamW steps
//   checkpoint/training_*.rec      the same entries in the records format (flags 0 and 2)
//   npz/tapegrad_*.npz             save_npz_bytes output, stored and deflated
//   npy/*.npy                      single arrays: every dtype, rank 0 to 4, an empty one
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include <xtensor/xnpy.hpp>

#include "fuzz/checkpoint_records.hpp"
#include "nn/io/checkpoint.hpp"
#include "nn/io/training_state.hpp"

using namespace tapegrad;

namespace {
void write(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  if (!out) {
    std::fprintf(stderr, "make_corpus: cannot write %s\n", path.c_str());
    std::exit(2);
  }
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The entries of a training checkpoint of `model` after two AdamW steps on fixed tokens.
std::vector<NpzEntry> training_checkpoint(Transformer<float>& model) {
  AdamW<float> opt(model.parameters());
  Indices tokens = Indices::from_shape({1, 4}), targets = Indices::from_shape({1, 4});
  for (std::size_t i = 0; i < 4; ++i) {
    tokens.data()[i] = std::int64_t(i % 5);
    targets.data()[i] = std::int64_t((i + 1) % 5);
  }
  for (int step = 0; step < 2; ++step) {
    model.loss(tokens, targets, -100).backward();
    opt.step();
    model.zero_grad();
  }
  TrainingState<float> s;
  s.step = 2;
  s.total_steps = 10;
  s.moments = collect_moments<float>(model, {&opt});
  Generator data(7);
  s.generators["data"] = generator_state(data);
  s.losses = {1.6, 1.5};
  s.lrs = {1e-3, 1e-3};
  s.integer_settings["batch"] = 1;
  s.real_settings["lr"] = 1e-3;
  std::vector<NpzEntry> entries = config_entries(model.config());
  for (const NamedParameter<float>& p : model.named_parameters())
    entries.emplace_back(p.name, xt::xarray<float>(p.tensor.value()));
  for (NpzEntry& e : training_state_entries(s)) entries.push_back(std::move(e));
  return entries;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_corpus CORPUS_DIR (e.g. fuzz/corpus)\n");
    return 2;
  }
  const std::string dir = argv[1];
  Transformer<float> model(fuzz::existing_config());
  save_checkpoint(dir + "/checkpoint/tiny.npz", model);
  const std::string tiny = slurp(dir + "/checkpoint/tiny.npz");
  write(dir + "/checkpoint/truncated.npz", tiny.substr(0, tiny.size() / 2));
  const std::vector<NpzEntry> entries = load_npz_bytes(tiny);
  for (std::uint8_t flags = 0; flags < 4; ++flags)
    write(dir + "/checkpoint/tiny_" + std::to_string(flags) + ".rec",
          fuzz::encode_records(flags, entries));
  Transformer<float> trained(fuzz::existing_config());
  const std::vector<NpzEntry> training = training_checkpoint(trained);
  write(dir + "/checkpoint/training.npz", save_npz_bytes(training));
  for (std::uint8_t flags : {0, 2})
    write(dir + "/checkpoint/training_" + std::to_string(flags) + ".rec",
          fuzz::encode_records(flags, training));
  std::vector<NpzEntry> huge = config_entries(fuzz::existing_config());
  for (NpzEntry& e : huge)
    if (e.name == std::string(kConfigPrefix) + "vocab" || e.name == std::string(kConfigPrefix) + "d_model")
      e.as<std::int64_t>().data()[0] = std::int64_t{1} << 24;
  write(dir + "/checkpoint/huge_config.rec", fuzz::encode_records(0, huge));

  std::vector<NpzEntry> mixed;
  mixed.emplace_back("w", xt::xarray<float>{{1.5f, -2.0f, 0.25f}, {3.0f, 4.0f, -0.0f}});
  mixed.emplace_back("d", xt::xarray<double>{1e300, -1e-300, 0.5});
  mixed.emplace_back("ids", xt::xarray<std::int64_t>{0, -1, 7});
  write(dir + "/npz/tapegrad_stored.npz", save_npz_bytes(mixed, false));
  write(dir + "/npz/tapegrad_deflated.npz", save_npz_bytes(mixed, true));
  write(dir + "/npy/f4_2x3.npy", xt::dump_npy(xt::xarray<float>{{1, 2, 3}, {4, 5, 6}}));
  xt::xarray<double> rank0 = xt::xarray<double>::from_shape({});
  rank0.data()[0] = 2.5;
  write(dir + "/npy/f8_rank0.npy", xt::dump_npy(rank0));
  xt::xarray<std::int64_t> rank4 = xt::xarray<std::int64_t>::from_shape({2, 1, 2, 1});
  for (std::size_t i = 0; i < rank4.size(); ++i) rank4.data()[i] = static_cast<std::int64_t>(i) - 2;
  write(dir + "/npy/i8_rank4.npy", xt::dump_npy(rank4));
  write(dir + "/npy/f4_empty.npy", xt::dump_npy(xt::xarray<float>::from_shape({0, 3})));
  std::printf("make_corpus: wrote the generated seeds under %s\n", dir.c_str());
  return 0;
}
