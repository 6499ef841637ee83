#pragma once
// Whole files as bytes: read in one go, and written atomically (a temporary file in the same
// directory, fsynced, renamed over the target, the directory fsynced). Below everything
// that reads or writes a file (text/'s tokenizers, tasks/' text, nn/io's formats): a file
// that cannot be opened, read or written is an IoError (platform/io_error.hpp) naming the
// file, with the errno of the system call that failed.
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "platform/io_error.hpp"

namespace tapegrad {

// The largest text file a program reads whole: 64 MiB (a character model's tokens take 8
// bytes per character in memory).
inline constexpr std::uintmax_t kMaxTextBytes = std::uintmax_t(64) << 20;

// A text input refused before or while reading it: not a regular file, larger than the
// limit, or more than the memory left. The file is bad input, not a failed read.
struct TextInputError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// The bytes of the regular file at `path`, named `label` in messages ("--text kjv.txt"),
// at most `max_bytes` of them. A device or a pipe (/dev/zero) would grow the read without
// bound and a FIFO's open would wait for a writer, so both are refused before a byte is
// read (TextInputError), as is a file over the limit; IoError (a std::system_error with the
// errno: std::errc::no_such_file_or_directory for a missing file) when the file cannot be
// opened or read.
std::string read_text_file(const std::string& path, const std::string& label,
                           std::uintmax_t max_bytes = kMaxTextBytes);

}  // namespace tapegrad

namespace tapegrad::detail {

// The bytes of the regular file at `path`; IoError whose message starts with `where`
// otherwise (a missing file, one that is not a regular file or too large to hold).
std::string read_file_bytes(const std::string& path, const std::string& where);

// Writes `bytes` to "<path>.tmp.<pid>" and renames it over `path`; on any error (an IoError
// whose message starts with `where`, with the errno) the temporary file is removed and a
// previous file at `path` is untouched.
void write_file_atomically(const std::string& path, std::string_view bytes,
                           const std::string& where);

// The same for a file too large to build in memory: `produce` hands its pieces, in order,
// to the writer it is given. A failed system call is an IoError (its errno) whose message
// starts with `where`; whatever `produce` throws passes through. Either way the
// temporary file is removed.
using WriteBytes = std::function<void(std::string_view)>;
void write_file_atomically(const std::string& path,
                           const std::function<void(const WriteBytes&)>& produce,
                           const std::string& where);

}  // namespace tapegrad::detail
