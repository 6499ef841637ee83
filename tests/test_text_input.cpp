// The one reader of text inputs (platform/file_io.hpp): a regular file of at most the limit,
// everything else refused before a byte is read, with the limit made small here.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "platform/file_io.hpp"
#include "test_paths.hpp"

namespace fs = std::filesystem;
using namespace tapegrad;

namespace {

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::path(TAPEGRAD_BINARY_DIR) / "test_text_input" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string message_of(const std::string& path, std::uintmax_t limit) {
  try {
    read_text_file(path, "--in " + path, limit);
  } catch (const TextInputError& e) {
    return e.what();
  }
  return "(read)";
}

}  // namespace

TEST_CASE("read_text_file: a regular file up to the limit is read whole", "[text_input]") {
  const fs::path dir = scratch("regular");
  std::ofstream(dir / "ten.txt", std::ios::binary) << "0123456789";
  CHECK(read_text_file((dir / "ten.txt").string(), "ten", 10) == "0123456789");
  std::ofstream(dir / "empty.txt").close();
  CHECK(read_text_file((dir / "empty.txt").string(), "empty", 10).empty());
}

TEST_CASE("read_text_file: over the limit, a device, a FIFO and a directory are refused by name",
          "[text_input]") {
  const fs::path dir = scratch("refused");
  const std::string eleven = (dir / "eleven.txt").string();
  std::ofstream(eleven, std::ios::binary) << "0123456789!";
  CHECK(message_of(eleven, 10) ==
        "--in " + eleven + " has 11 bytes, larger than the limit of 10 bytes");
  CHECK(message_of(eleven, std::uintmax_t(0)) ==
        "--in " + eleven + " has 11 bytes, larger than the limit of 0 bytes");
  CHECK(message_of("/dev/zero", kMaxTextBytes) ==
        "--in /dev/zero is not a regular file (a device, a pipe or a socket)");
  const std::string fifo = (dir / "fifo").string();
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);  // no writer: an open that waits would hang here
  CHECK(message_of(fifo, kMaxTextBytes) ==
        "--in " + fifo + " is not a regular file (a device, a pipe or a socket)");
  CHECK(message_of(dir.string(), kMaxTextBytes) ==
        "--in " + dir.string() + " is a directory, not a text file");
  // the stated limit in MiB
  const fs::path big = dir / "big.txt";
  std::ofstream(big).close();
  fs::resize_file(big, (std::uintmax_t(1) << 20) + 1);  // sparse
  CHECK(message_of(big.string(), std::uintmax_t(1) << 20).find("larger than the limit of 1 MiB") !=
        std::string::npos);
}

TEST_CASE("read_text_file: a file that cannot be opened is a runtime error naming it", "[text_input]") {
  const std::string missing = "/nonexistent/dir/file.txt";
  try {
    read_text_file(missing, "--in " + missing);
    FAIL("read");
  } catch (const TextInputError&) {
    FAIL("a missing file is not a refused input");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).find("cannot open --in " + missing) != std::string::npos);
  }
}
