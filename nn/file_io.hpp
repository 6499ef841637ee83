#pragma once
// Whole files as bytes: read in one go, and written atomically (a temporary file in the same
// directory, fsynced, renamed over the target, the directory fsynced). Errors are NpzError
// naming `where`, as for the rest of the npz layer.
#include <string>
#include <string_view>

namespace tapegrad::detail {

// The bytes of the regular file at `path`.
std::string read_file_bytes(const std::string& path, const std::string& where);

// Writes `bytes` to "<path>.tmp.<pid>" and renames it over `path`; on any error the
// temporary file is removed and a previous file at `path` is untouched.
void write_file_atomically(const std::string& path, std::string_view bytes,
                           const std::string& where);

}  // namespace tapegrad::detail
