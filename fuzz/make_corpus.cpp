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
//   safetensors/tapegrad_*.safetensors  save_safetensors output, F32 and F64
//   safetensors/halves.safetensors      BF16, F16 and I64 laid out by hand, header unsorted
//   safetensors/bad_*.safetensors       near misses: each breaks one of the reader's checks
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>

#include <xtensor/xnpy.hpp>

#include "fuzz/checkpoint_records.hpp"
#include "nn/io/checkpoint.hpp"
#include "nn/io/safetensors.hpp"
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
// A safetensors file: the header's length (u64, little-endian), the header, the buffer.
std::string safetensors_bytes(const std::string& header, const std::string& buffer) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + buffer;
}

void write_safetensors_seeds(const std::string& dir) {
  const float w[] = {1.5f, -2.0f, 0.25f, 3.0f, 4.0f, -0.0f};
  const float s = 7.0f;
  save_safetensors<float>(dir + "/tapegrad_f32.safetensors",
                          {{"w", {2, 3}, w}, {"s", {}, &s}, {"e", {0, 3}, nullptr}});
  const double d[] = {1e300, -1e-300, 0.5};
  save_safetensors<double>(dir + "/tapegrad_f64.safetensors", {{"d", {3}, d}}, {{"k", "v"}});
  // 1, -2 in BF16; 1, the smallest subnormal, inf, NaN in F16; an I64 that read() refuses
  const std::string halves("\x80\x3f\x00\xc0\x00\x3c\x01\x00\x00\x7c\x00\x7e", 12);
  const std::string entries =
      "\"h\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[4,12]},"
      "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]},"
      "\"i\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[12,20]}";
  const std::string buffer = halves + std::string(8, '\1');
  write(dir + "/halves.safetensors", safetensors_bytes("{" + entries + "}", buffer));
  const auto entry = [](const char* name, const char* dtype, const char* shape,
                        const char* offsets) {
    return std::string("\"") + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
           ",\"data_offsets\":" + offsets + "}";
  };
  const std::string a = entry("a", "F32", "[2]", "[0,8]");
  const std::string eight(8, '\0');
  write(dir + "/bad_trailing.safetensors", safetensors_bytes("{" + a + "}", eight + "xxxx"));
  write(dir + "/bad_duplicate.safetensors", safetensors_bytes("{" + a + "," + a + "}", eight));
  write(dir + "/bad_overlap.safetensors",
        safetensors_bytes("{" + a + "," + entry("b", "F32", "[2]", "[4,12]") + "}",
                          eight + "xxxx"));
  write(dir + "/bad_hole.safetensors",
        safetensors_bytes("{" + entry("a", "F32", "[1]", "[4,8]") + "}", eight));
  write(dir + "/bad_size.safetensors",
        safetensors_bytes("{" + entry("a", "F32", "[3]", "[0,8]") + "}", eight));
  write(dir + "/bad_dtype.safetensors",
        safetensors_bytes("{" + entry("a", "F128", "[1]", "[0,8]") + "}", eight));
  std::string past_end = safetensors_bytes("{" + a + "}", eight);
  past_end[0] = '\x7f';
  write(dir + "/bad_header_length.safetensors", past_end);
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
  write_safetensors_seeds(dir + "/safetensors");
  std::printf("make_corpus: wrote the generated seeds under %s\n", dir.c_str());
  return 0;
}
