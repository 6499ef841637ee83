// bpe_bench: BPE training time and encoding speed on one text file, at 1 thread.
//   bpe_bench <text file> [merges=4096] [mode=regex]
// The KJV: scripts/kjv-corpus.sh kjv.txt && build/tools/bpe_bench kjv.txt
// The goal: 4,096 merges in at most 30 s, encoding at 5 MB/s or more.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "text/bpe_tokenizer.hpp"

using namespace tapegrad::text;

namespace {
double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) {
    std::fprintf(stderr, "usage: bpe_bench <text file> [merges=4096] [basic|regex]\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "bpe_bench: cannot open %s\n", argv[1]);
    return 2;
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  const std::string text = contents.str();
  const int merges = argc > 2 ? std::stoi(argv[2]) : 4096;
  const BpeMode mode = parse_bpe_mode(argc > 3 ? argv[3] : "regex");

  auto start = std::chrono::steady_clock::now();
  BpeTokenizer tokenizer = BpeTokenizer::train(text, 256 + merges, mode);
  const double train_seconds = seconds_since(start);

  start = std::chrono::steady_clock::now();
  std::vector<std::int32_t> ids = tokenizer.encode(text);
  const double encode_seconds = seconds_since(start);
  const bool round_trip = tokenizer.decode_bytes(ids) == text;

  const double megabytes = double(text.size()) / 1e6;
  std::printf("bpe_bench: %s, %.2f MB, mode %s, %zu merges\n", argv[1], megabytes,
              bpe_mode_name(mode), tokenizer.merges().size());
  std::printf("train   %.2f s\n", train_seconds);
  std::printf("encode  %.2f s, %.2f MB/s, %zu tokens, %.3f bytes per token\n", encode_seconds,
              megabytes / encode_seconds, ids.size(), double(text.size()) / double(ids.size()));
  std::printf("round trip %s\n", round_trip ? "ok" : "FAILED");
  return round_trip ? 0 : 1;
}
