#pragma once
// Shared by the fuzz targets: what an accepted input must satisfy. Every entry's array
// holds exactly product(shape) elements, and saving the entries and loading them back
// gives the same names, dtypes, shapes and bytes (NaN payloads included). A violation
// prints what differs and aborts, which libFuzzer reports as a crash with the input.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <variant>
#include <vector>

#include "nn/io/npz.hpp"

namespace tapegrad::fuzz {

[[noreturn]] inline void violated(const std::string& what) {
  std::fprintf(stderr, "fuzz invariant violated: %s\n", what.c_str());
  std::abort();
}

inline std::size_t product(const std::vector<std::size_t>& shape) {
  std::size_t n = 1;
  for (std::size_t d : shape) n *= d;
  return n;
}

inline bool same_bytes(const NpzEntry& a, const NpzEntry& b) {
  if (a.name != b.name || a.dtype() != b.dtype() || a.shape() != b.shape()) return false;
  return std::visit(
      [&b](const auto& x) {
        using A = std::decay_t<decltype(x)>;
        const A& y = std::get<A>(b.array);
        return x.size() == y.size() &&
               (x.size() == 0 || std::memcmp(x.data(), y.data(), x.size() * sizeof(*x.data())) == 0);
      },
      a.array);
}

inline void require_consistent(const std::vector<NpzEntry>& entries) {
  for (const NpzEntry& e : entries) {
    const std::size_t n = std::visit([](const auto& a) { return a.size(); }, e.array);
    if (n != product(e.shape())) violated("entry '" + e.name + "' holds the wrong number of elements");
  }
}

// Loaded entries are valid npz content: save_npz_bytes must accept them (any exception
// escapes to libFuzzer as a bug) and load_npz_bytes must give them back unchanged.
inline void require_round_trip(const std::vector<NpzEntry>& entries) {
  require_consistent(entries);
  if (entries.empty()) return;  // an empty archive loads, but save_npz refuses to write one
  for (bool compress : {false, true}) {
    const std::string bytes = save_npz_bytes(entries, compress);
    const std::vector<NpzEntry> again = load_npz_bytes(bytes, "round trip");
    if (again.size() != entries.size()) violated("the round trip changed the number of entries");
    for (std::size_t i = 0; i < entries.size(); ++i)
      if (!same_bytes(entries[i], again[i]))
        violated("the round trip changed entry '" + entries[i].name + "'");
  }
}

}  // namespace tapegrad::fuzz
