#pragma once
// One .npy array: the strict reader (every length checked against the bytes present before
// anything is allocated) and xtensor's writer. nn/io/npz stores one of these per zip member.
#include <string>
#include <string_view>

#include "nn/io/npz.hpp"  // NpzEntry::Array, NpzError

namespace tapegrad::detail {

// The array in one .npy file's bytes: dtypes <f4, <f8, <i8 (also big-endian, and <i4 / |b1
// widened to int64), C or Fortran order, format versions 1.0 to 3.0. Anything else, or a
// length that does not match the bytes, -> NpzError naming `where`.
NpzEntry::Array parse_npy(std::string_view bytes, const std::string& where);

// `array` as .npy bytes, as numpy.save writes them.
std::string npy_bytes(const NpzEntry::Array& array);

}  // namespace tapegrad::detail
