#pragma once
// The .npz container that checkpoints are built on: a zip (libzip) of one `<name>.npy`
// per array, readable by numpy.load. Writing is atomic; reading treats the bytes as
// hostile (a fuzzer is pointed at load_npz_bytes) and fails with NpzError, never a crash.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <xtensor/xarray.hpp>

#include "nn/io/npz_error.hpp"

namespace tapegrad {

// The variant index doubles as the dtype, so keep the two in the same order.
enum class NpzDtype { float32 = 0, float64 = 1, int64 = 2 };

// "float32", "float64", "int64" (numpy's names, for messages).
const char* npz_dtype_name(NpzDtype dtype);

template <class T>
constexpr NpzDtype npz_dtype_of() {
  static_assert(
      std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::int64_t>,
      "an npz entry holds float, double or std::int64_t");
  if constexpr (std::is_same_v<T, float>)
    return NpzDtype::float32;
  else if constexpr (std::is_same_v<T, double>)
    return NpzDtype::float64;
  else
    return NpzDtype::int64;
}

namespace detail {
[[noreturn]] void throw_npz_dtype_mismatch(const std::string& name, NpzDtype wanted, NpzDtype held);
}

struct NpzEntry {
  using Array = std::variant<xt::xarray<float>, xt::xarray<double>, xt::xarray<std::int64_t>>;

  std::string name;  // the key numpy.load shows: the member name without ".npy"
  Array array;

  NpzEntry() = default;
  NpzEntry(std::string entry_name, Array entry_array)
      : name(std::move(entry_name)), array(std::move(entry_array)) {}

  NpzDtype dtype() const { return static_cast<NpzDtype>(array.index()); }
  std::vector<std::size_t> shape() const;

  template <class T>
  bool holds() const {
    return std::holds_alternative<xt::xarray<T>>(array);
  }
  // The array as xt::xarray<T>; NpzError naming the entry and both dtypes if it is not.
  template <class T>
  const xt::xarray<T>& as() const {
    if (const auto* a = std::get_if<xt::xarray<T>>(&array)) return *a;
    detail::throw_npz_dtype_mismatch(name, npz_dtype_of<T>(), dtype());
  }
  template <class T>
  xt::xarray<T>& as() {
    if (auto* a = std::get_if<xt::xarray<T>>(&array)) return *a;
    detail::throw_npz_dtype_mismatch(name, npz_dtype_of<T>(), dtype());
  }
};

// The entry called `name`, or nullptr.
const NpzEntry* find_npz_entry(const std::vector<NpzEntry>& entries, std::string_view name);

// Names must be non-empty, unique, at most 1024 bytes, and free of '/', '\\' and NUL (a
// member name is also a path when someone unzips the file). Dots are fine:
// "blocks.0.attn.Wq". Throws NpzError naming `what` and the bad name.
void check_npz_name(const std::string& name, const std::string& what);

// Writes `entries` to `path` as an npz that numpy.load reads, one "<name>.npy" member
// each, in order (compress: deflate, as numpy.savez_compressed; default stored, as
// numpy.savez). Atomic: the zip goes to "<path>.tmp.<pid>" in the same directory, is
// fsynced, then renamed over `path`; on any error the temporary file is removed, a
// previous file at `path` is untouched, and NpzError names the path.
void save_npz(const std::string& path, const std::vector<NpzEntry>& entries, bool compress = false);

// The same archive as save_npz writes, in memory.
std::string save_npz_bytes(const std::vector<NpzEntry>& entries, bool compress = false);

// Reads every member of the npz at `path`, in archive order. Accepts the dtypes <f4, <f8
// and <i8 (also their big-endian forms, and <i4 / |b1 widened to int64) in C or Fortran
// order; npy format versions 1.0, 2.0 and 3.0; stored or deflated members of at most
// 4 GiB each and 8 GiB together. Anything else -> NpzError.
std::vector<NpzEntry> load_npz(const std::string& path);

// load_npz on bytes already in memory (the fuzzing entry point); `label` stands for the
// file name in error messages.
std::vector<NpzEntry> load_npz_bytes(std::string_view bytes, const std::string& label = "<memory>");

// One .npy file's bytes -> its array, with the same checks as a member of an npz.
NpzEntry::Array load_npy_bytes(std::string_view bytes, const std::string& label = "<memory>");

}  // namespace tapegrad
