#include "platform/file_io.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "platform/format_bytes.hpp"

namespace tapegrad::detail {

namespace {

std::string errno_text(int e) { return std::strerror(e); }

// 0, or the errno of the failed write.
int write_all(int fd, std::string_view bytes) {
  const char* p = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return 0;
}

}  // namespace

std::string read_file_bytes(const std::string& path, const std::string& where) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    throw IoError(e, where + ": cannot open: " + errno_text(e));
  }
  std::string bytes;
  std::string err;
  int err_number = 0;  // the errno behind `err`, where a system call failed
  struct stat sb;
  if (::fstat(fd, &sb) != 0) {
    err_number = errno;
    err = "cannot stat: " + errno_text(err_number);
  } else if (!S_ISREG(sb.st_mode)) {
    err = "not a regular file";
  } else {
    try {
      bytes.resize(static_cast<std::size_t>(sb.st_size));
    } catch (const std::exception&) {
      err = "too large to read (" + std::to_string(sb.st_size) + " bytes)";
    }
    std::size_t got = 0;
    while (err.empty() && got < bytes.size()) {
      const ssize_t n = ::read(fd, &bytes[got], bytes.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        err_number = errno;
        err = "read error: " + errno_text(err_number);
      } else if (n == 0)
        bytes.resize(got);  // shrank while reading
      else
        got += static_cast<std::size_t>(n);
    }
  }
  ::close(fd);
  if (!err.empty()) throw IoError(err_number, where + ": " + err);
  return bytes;
}

void write_file_atomically(const std::string& path,
                           const std::function<void(const WriteBytes&)>& produce,
                           const std::string& where) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int e = errno;
    throw io_error(e, where + ": cannot create the temporary file '" + tmp + "'");
  }
  const char* step = "write";
  int e = 0;
  try {
    produce([&](std::string_view bytes) {
      if (e == 0) e = write_all(fd, bytes);  // after a failure, the rest is not written
    });
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (e == 0) {
    step = "fsync";
    if (::fsync(fd) != 0) e = errno;
  }
  if (::close(fd) != 0 && e == 0) {
    step = "close";
    e = errno;
  }
  if (e == 0) {
    step = "rename";
    if (::rename(tmp.c_str(), path.c_str()) != 0) e = errno;
  }
  if (e != 0) {
    ::unlink(tmp.c_str());
    throw io_error(e, where + ": cannot " + step + " the temporary file '" + tmp +
                          "' (the previous file, if any, is unchanged)");
  }
  // Make the rename itself durable. Some filesystems refuse to fsync a directory; the
  // file is already in place, so that is not an error.
  const auto slash = path.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void write_file_atomically(const std::string& path, std::string_view bytes,
                           const std::string& where) {
  write_file_atomically(path, [&](const WriteBytes& write) { write(bytes); }, where);
}

}  // namespace tapegrad::detail

namespace tapegrad {

namespace {

// Closes the descriptor on every way out of the reader.
struct OpenFile {
  int fd;
  ~OpenFile() { ::close(fd); }
};

// Reads `fd` to its end into a buffer first sized for `expected` bytes; a file that grows
// past `max_bytes` while being read is refused.
std::string read_to_end(int fd, std::uintmax_t expected, const std::string& label,
                        std::uintmax_t max_bytes) {
  std::string bytes(static_cast<std::size_t>(expected) + 1, '\0');  // one more shows growth
  std::size_t got = 0;
  for (;;) {
    if (got == bytes.size()) {
      if (got > max_bytes)
        throw TextInputError(label + " grew while being read past the limit of " +
                             format_bytes(double(max_bytes)));
      bytes.resize(static_cast<std::size_t>(std::min<std::uintmax_t>(max_bytes + 1, 2 * got)));
    }
    const ssize_t n = ::read(fd, &bytes[got], bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      throw io_error(e, "cannot read " + label);
    }
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  bytes.resize(got);
  return bytes;
}

}  // namespace

std::string read_text_file(const std::string& path, const std::string& label,
                           std::uintmax_t max_bytes) {
  // O_NONBLOCK: a FIFO opens at once (to be refused) instead of waiting for a writer
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  // an IoError keeps the errno, so Python raises FileNotFoundError for a missing file
  if (fd < 0) {
    const int e = errno;
    throw io_error(e, "cannot open " + label);
  }
  const OpenFile file{fd};
  struct stat sb;
  if (::fstat(fd, &sb) != 0) {
    const int e = errno;
    throw io_error(e, "cannot stat " + label);
  }
  if (S_ISDIR(sb.st_mode)) throw TextInputError(label + " is a directory, not a text file");
  if (!S_ISREG(sb.st_mode))
    throw TextInputError(label + " is not a regular file (a device, a pipe or a socket)");
  const auto size = static_cast<std::uintmax_t>(sb.st_size);
  if (size > max_bytes)
    throw TextInputError(label + " has " + std::to_string(size) + " bytes, larger than the limit of " +
                         format_bytes(double(max_bytes)));
  try {
    return read_to_end(file.fd, size, label, max_bytes);
  } catch (const std::bad_alloc&) {
    throw TextInputError("out of memory reading " + label + " (" + std::to_string(size) +
                         " bytes)");
  }
}

}  // namespace tapegrad
