#pragma once
// The one error of reading and writing files, below everything that reads or writes one:
// platform/file_io (whole files read, written atomically), the tokenizers of text/, and
// the file formats of nn/io, whose errors derive from it (NpzError).
#include <stdexcept>
#include <string>
#include <system_error>

namespace tapegrad {

// A file that cannot be opened, read, written or renamed: the message names the file and
// what failed. A std::system_error: code() is the errno of the system call that failed
// (std::generic_category: std::errc::no_such_file_or_directory for a missing file), or
// holds 0 where no system call failed (a file refused for what it is: not a regular file,
// too large to hold in memory). what() is the message as given, which carries the errno's
// text where there is one (io_error builds it so).
class IoError : public std::system_error {
 public:
  explicit IoError(const std::string& message) : IoError(0, message) {}
  IoError(int error_number, const std::string& message)
      : std::system_error(error_number, std::generic_category(), message), message_(message) {}
  const char* what() const noexcept override { return message_.what(); }

 private:
  std::runtime_error message_;  // copied without throwing, as an exception must be
};

// "<what>: <the errno's text>", the message std::system_error makes, with that errno.
inline IoError io_error(int error_number, const std::string& what) {
  return IoError(error_number, what + ": " + std::generic_category().message(error_number));
}

}  // namespace tapegrad
