// The three parts under the npz layer, each on its own: the .npy format (nn/io/npy), the zip
// container (nn/io/zip_archive) and whole-file I/O with the atomic write (platform/file_io,
// below nn/: its errors are IoError, which the npz layer reports as NpzError). The
// layer as a whole (numpy agreement, hostile files, fixtures) is tested in test_npz.cpp.
#include <catch2/catch.hpp>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "nn/io/npy.hpp"
#include "nn/io/npz.hpp"
#include "nn/io/zip_archive.hpp"
#include "platform/file_io.hpp"

using namespace tapegrad;
namespace fs = std::filesystem;

namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

template <class F>
std::string npz_error_of(F&& f) {
  try {
    f();
  } catch (const NpzError& e) {
    return e.what();
  }
  FAIL("no NpzError");
  return {};
}

// The message of the IoError f throws, which must not be an NpzError (platform/file_io is
// below the npz layer), prefixed with its errno: "2 r: cannot open: ...".
template <class F>
std::string io_error_of(F&& f) {
  try {
    f();
  } catch (const NpzError& e) {
    FAIL("an NpzError: " << e.what());
  } catch (const IoError& e) {
    return std::to_string(e.code().value()) + " " + e.what();
  }
  FAIL("no IoError");
  return {};
}

}  // namespace

TEST_CASE("npy bytes round-trip each dtype and are numpy's format", "[npz]") {
  const xt::xarray<float> f = {{1.5f, -2.0f, 3.25f}, {0.0f, 4.0f, -0.5f}};
  const std::string bytes = detail::npy_bytes(f);
  CHECK(bytes.rfind("\x93NUMPY", 0) == 0);
  const NpzEntry::Array back = detail::parse_npy(bytes, "t");
  REQUIRE(std::holds_alternative<xt::xarray<float>>(back));
  CHECK(bool(std::get<xt::xarray<float>>(back) == f));

  const xt::xarray<std::int64_t> i = {7, -8, 9};
  CHECK(bool(std::get<xt::xarray<std::int64_t>>(detail::parse_npy(detail::npy_bytes(i), "t")) == i));
  const xt::xarray<double> d = xt::xarray<double>::from_shape(std::vector<std::size_t>{});
  CHECK(std::get<xt::xarray<double>>(detail::parse_npy(detail::npy_bytes(d), "t")).dimension() ==
        0);

  CHECK(npz_error_of([&] { detail::parse_npy(bytes.substr(0, bytes.size() - 1), "where"); })
            .rfind("where: shape (2,3) of <f4 needs 24 data bytes but the array holds 23", 0) == 0);
  CHECK(npz_error_of([] { detail::parse_npy("not npy", "where"); }) ==
        "where: not an npy array (bad magic)");
}

TEST_CASE("zip archive members round-trip in order, stored or deflated", "[npz]") {
  const std::vector<detail::ZipMember> members = {
      {"b.bin", std::string(1000, 'x')}, {"a.bin", "short"}, {"empty", ""}};
  for (bool compress : {false, true}) {
    INFO(compress);
    const std::string zip = detail::build_zip(members, compress, "w");
    CHECK(zip == detail::build_zip(members, compress, "w"));  // same members, same bytes
    std::vector<detail::ZipMember> back;
    std::vector<std::string> checked;
    detail::read_zip(
        zip, "r", [&](const std::string& name, const std::string& where) {
          checked.push_back(name);
          CHECK(where == "r: member '" + name + "'");
        },
        [&](const std::string& name, std::string bytes, const std::string&) {
          back.push_back({name, std::move(bytes)});
        });
    REQUIRE(back.size() == members.size());
    CHECK(checked == std::vector<std::string>{"b.bin", "a.bin", "empty"});
    for (std::size_t k = 0; k < members.size(); ++k) {
      CHECK(back[k].name == members[k].name);
      CHECK(back[k].bytes == members[k].bytes);
    }
  }
  // A name check that refuses a member stops the read before its bytes are taken.
  const std::string zip = detail::build_zip(members, false, "w");
  int taken = 0;
  const std::string msg = npz_error_of([&] {
    detail::read_zip(
        zip, "r",
        [](const std::string& name, const std::string& where) {
          if (name == "a.bin") throw NpzError(where + ": refused");
        },
        [&](const std::string&, std::string, const std::string&) { ++taken; });
  });
  CHECK(msg == "r: member 'a.bin': refused");
  CHECK(taken == 1);
  CHECK(npz_error_of([] { detail::read_zip("", "r", nullptr, nullptr); }) ==
        "r: empty file, not an npz archive");
  CHECK(has(npz_error_of([] { detail::read_zip("PK not a zip", "r", nullptr, nullptr); }),
            "r: not a valid zip archive"));
}

TEST_CASE("file bytes: atomic write replaces the file and leaves no temporary", "[npz]") {
  std::string templ = (fs::temp_directory_path() / "tapegrad-file-io-XXXXXX").string();
  REQUIRE(::mkdtemp(templ.data()) != nullptr);
  const fs::path dir = templ;
  const std::string path = (dir / "f.bin").string();

  detail::write_file_atomically(path, std::string("first\0one", 9), "w");
  CHECK(detail::read_file_bytes(path, "r") == std::string("first\0one", 9));
  detail::write_file_atomically(path, "second", "w");
  CHECK(detail::read_file_bytes(path, "r") == "second");
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file();
  CHECK(files == 1);

  const std::string missing = (dir / "no" / "f.bin").string();
  const std::string enoent = std::to_string(ENOENT) + " ";
  CHECK(has(io_error_of([&] { detail::write_file_atomically(missing, "x", "w"); }),
            enoent + "w: cannot create the temporary file '" + missing + ".tmp."));
  CHECK(has(io_error_of([&] { detail::read_file_bytes(missing, "r"); }), enoent + "r: cannot open: "));
  CHECK(io_error_of([&] { detail::read_file_bytes(dir.string(), "r"); }) ==
        "0 r: not a regular file");
  // the npz layer above it reports the same failures as NpzError, the errno kept
  try {
    load_npz(missing);
    FAIL("load_npz read a missing file");
  } catch (const NpzError& e) {
    CHECK(e.code() == std::errc::no_such_file_or_directory);
    CHECK(has(e.what(), "load_npz: '" + missing + "': cannot open: "));
  }
  const std::vector<NpzEntry> one = {NpzEntry("a", xt::xarray<float>{1.0f})};
  try {
    save_npz(missing, one);
    FAIL("save_npz wrote into a missing folder");
  } catch (const NpzError& e) {
    CHECK(e.code() == std::errc::no_such_file_or_directory);
    CHECK(has(e.what(), "save_npz: '" + missing + "': cannot create the temporary file"));
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
}
