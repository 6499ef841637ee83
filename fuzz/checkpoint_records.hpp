#pragma once
// The fuzz_checkpoint input format besides raw .npz files. A raw checkpoint reaches the
// checkpoint logic only while every member's CRC-32 still matches, so most mutations die
// in the zip layer; this format hands the fuzzer the entries themselves:
//   byte 0      flags: bit 0 load as double (else float); bit 1 load into an existing
//               model (kExistingConfig) instead of building one from the file's config
//   then        records: u8 name length, name bytes, u16 little-endian npy length, npy bytes
// The harness parses the records (skipping npy bytes that do not load), writes them as an
// npz with save_npz_bytes and loads that file as a checkpoint. Inputs starting with "PK"
// are raw checkpoint files instead.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <xtensor/xnpy.hpp>

#include "nn/io/npz.hpp"
#include "nn/transformer.hpp"

namespace tapegrad::fuzz {

enum : std::uint8_t { kAsDouble = 1, kIntoExisting = 2 };

// The architecture of fuzz/corpus/checkpoint/tiny.npz (and of the existing model).
inline TransformerConfig existing_config() {
  TransformerConfig c;
  c.vocab = 5;
  c.context = 4;
  c.d_model = 4;
  c.heads = 1;
  c.layers = 1;
  c.mlp_ratio = 1;
  c.seed = 1;
  return c;
}

struct Records {
  std::uint8_t flags = 0;
  std::vector<NpzEntry> entries;
};

// Entries whose npy bytes do not load are skipped (the npy parser has its own target).
inline Records decode_records(std::string_view in) {
  Records r;
  if (in.empty()) return r;
  r.flags = static_cast<std::uint8_t>(in[0]);
  std::size_t p = 1;
  while (p < in.size()) {
    const std::size_t name_len = static_cast<std::uint8_t>(in[p++]);
    if (in.size() - p < name_len) break;
    std::string name(in.substr(p, name_len));
    p += name_len;
    if (in.size() - p < 2) break;
    const std::size_t npy_len = static_cast<std::uint8_t>(in[p]) |
                                (static_cast<std::size_t>(static_cast<std::uint8_t>(in[p + 1])) << 8);
    p += 2;
    if (in.size() - p < npy_len) break;
    try {
      r.entries.emplace_back(std::move(name), load_npy_bytes(in.substr(p, npy_len), "record"));
    } catch (const NpzError&) {
    }
    p += npy_len;
  }
  return r;
}

// Entries -> records (used by make_corpus to turn a checkpoint into a seed). Every npy
// must fit in 64 KiB and every name in 255 bytes.
inline std::string encode_records(std::uint8_t flags, const std::vector<NpzEntry>& entries) {
  std::string out(1, static_cast<char>(flags));
  for (const NpzEntry& e : entries) {
    std::string npy;
    std::visit([&npy](const auto& a) { npy = xt::dump_npy(a); }, e.array);
    if (e.name.size() > 255 || npy.size() > 0xffff) throw NpzError("record too large: " + e.name);
    out += static_cast<char>(e.name.size());
    out += e.name;
    out += static_cast<char>(npy.size() & 0xff);
    out += static_cast<char>(npy.size() >> 8);
    out += npy;
  }
  return out;
}

}  // namespace tapegrad::fuzz
