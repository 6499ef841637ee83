// The npz container: bitwise round trips, agreement with numpy in both directions, damaged
// and hostile files rejected with NpzError, and the atomic save.
#include <catch2/catch.hpp>

#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

#include "nn/io/npz.hpp"
#include "temp_files.hpp"
#include "test_paths.hpp"

using namespace tapegrad;
using test::TempDir;
using test::read_bytes;
using test::write_bytes;
namespace fs = std::filesystem;

namespace {

const std::string kFixtures = std::string(TAPEGRAD_FIXTURES_DIR) + "/npz";

std::vector<std::size_t> shape_of(const NpzEntry& e) { return e.shape(); }

template <class T>
bool same_bits(const xt::xarray<T>& a, const xt::xarray<T>& b) {
  if (std::vector<std::size_t>(a.shape().begin(), a.shape().end()) !=
      std::vector<std::size_t>(b.shape().begin(), b.shape().end()))
    return false;
  return a.size() == 0 || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

bool same_entry(const NpzEntry& a, const NpzEntry& b) {
  if (a.name != b.name || a.dtype() != b.dtype()) return false;
  switch (a.dtype()) {
    case NpzDtype::float32: return same_bits(a.as<float>(), b.as<float>());
    case NpzDtype::float64: return same_bits(a.as<double>(), b.as<double>());
    case NpzDtype::int64: return same_bits(a.as<std::int64_t>(), b.as<std::int64_t>());
  }
  return false;
}

bool same_entries(const std::vector<NpzEntry>& a, const std::vector<NpzEntry>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!same_entry(a[i], b[i])) return false;
  return true;
}

// xarray of `shape` whose flat element n is f(n).
template <class T, class F>
xt::xarray<T> filled(const std::vector<std::size_t>& shape, F f) {
  auto a = xt::xarray<T>::from_shape(shape);
  for (std::size_t n = 0; n < a.size(); ++n) a.data()[n] = f(n);
  return a;
}

// Runs `fn`, requires NpzError, and checks its message mentions each of `parts`.
template <class Fn>
void require_npz_error(Fn fn, const std::vector<std::string>& parts) {
  try {
    fn();
    FAIL("no NpzError thrown");
  } catch (const NpzError& e) {
    const std::string msg = e.what();
    INFO("message: " << msg);
    for (const auto& p : parts) CHECK(msg.find(p) != std::string::npos);
  }
}

// A version 1.0 npy with a hand-written header dict, padded as numpy pads it.
std::string raw_npy(const std::string& dict, const std::string& payload, int major = 1) {
  std::string h = dict;
  const std::size_t prefix = major == 1 ? 10 : 12;
  h += std::string(64 - (prefix + h.size() + 1) % 64, ' ') + "\n";
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const std::size_t n = h.size();
  out += static_cast<char>(n & 0xff);
  out += static_cast<char>((n >> 8) & 0xff);
  if (major != 1) out += std::string(2, '\0');
  return out + h + payload;
}

std::vector<NpzEntry> mixed_entries() {
  const float fnan = std::numeric_limits<float>::quiet_NaN();
  const float finf = std::numeric_limits<float>::infinity();
  const double dnan = std::numeric_limits<double>::quiet_NaN();
  const double dinf = std::numeric_limits<double>::infinity();
  std::vector<NpzEntry> e;
  // rank 0 to 4 in each dtype, special values at the front
  e.emplace_back("f32.r0", xt::xarray<float>(-0.0f));
  e.emplace_back("f32.r1", xt::xarray<float>{-0.0f, finf, -finf, fnan, 1e-45f, 3.4e38f});
  e.emplace_back("f32.r2",
                 filled<float>({3, 5}, [](std::size_t n) { return 0.1f * float(n) - 0.7f; }));
  e.emplace_back("f32.r3",
                 filled<float>({2, 3, 4}, [](std::size_t n) { return std::sin(float(n)); }));
  e.emplace_back("f32.r4",
                 filled<float>({2, 1, 3, 2}, [](std::size_t n) { return -float(n) / 3; }));
  e.emplace_back("f64.r0", xt::xarray<double>(dnan));
  e.emplace_back("f64.r1", xt::xarray<double>{-0.0, dinf, -dinf, dnan, 5e-324, 1.0 / 3.0});
  e.emplace_back("f64.r2",
                 filled<double>({4, 2}, [](std::size_t n) { return std::exp(double(n)) - 7; }));
  e.emplace_back("f64.r3",
                 filled<double>({1, 1, 7}, [](std::size_t n) { return std::sqrt(double(n)); }));
  e.emplace_back("f64.r4",
                 filled<double>({2, 2, 2, 2}, [](std::size_t n) { return 1e300 * double(n); }));
  e.emplace_back("i64.r0", xt::xarray<std::int64_t>(std::int64_t{-42}));
  e.emplace_back("i64.r1", xt::xarray<std::int64_t>{std::numeric_limits<std::int64_t>::min(), -1, 0,
                                                    std::numeric_limits<std::int64_t>::max()});
  e.emplace_back("i64.r2",
                 filled<std::int64_t>({2, 3}, [](std::size_t n) { return std::int64_t(n) << 40; }));
  e.emplace_back("i64.r3",
                 filled<std::int64_t>({3, 1, 2}, [](std::size_t n) { return -std::int64_t(n); }));
  e.emplace_back("i64.r4", filled<std::int64_t>({1, 2, 1, 3},
                                                [](std::size_t n) { return std::int64_t(n * n); }));
  // zero-size arrays
  e.emplace_back("f32.empty", xt::xarray<float>::from_shape({0, 3}));
  e.emplace_back("i64.empty", xt::xarray<std::int64_t>::from_shape({4, 0}));
  return e;
}

bool have_numpy() {
  return std::system("/usr/bin/python3 -c 'import numpy' > /dev/null 2>&1") == 0;
}

}  // namespace

TEST_CASE("npz round-trips float double and int64 arrays of rank 0 to 4 bitwise", "[npz]") {
  TempDir dir;
  const std::vector<NpzEntry> entries = mixed_entries();
  for (bool compress : {false, true}) {
    INFO("compress " << compress);
    const std::string path = dir.file(compress ? "deflated.npz" : "stored.npz");
    save_npz(path, entries, compress);
    const std::vector<NpzEntry> back = load_npz(path);
    REQUIRE(back.size() == entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) {
      INFO("entry " << entries[i].name);
      CHECK(back[i].name == entries[i].name);
      CHECK(back[i].dtype() == entries[i].dtype());
      CHECK(shape_of(back[i]) == shape_of(entries[i]));
      CHECK(same_entry(back[i], entries[i]));
    }
    // the sign of -0.0 and the NaN survive (bitwise equality above already implies it;
    // these say so in plain words)
    CHECK(std::signbit(back[0].as<float>()()));
    CHECK(std::isnan(back[5].as<double>()()));
    CHECK(load_npz_bytes(save_npz_bytes(entries, compress)).size() == entries.size());
  }
  // Only the final files: no temporary left behind.
  CHECK(dir.listing() == std::set<std::string>{"deflated.npz", "stored.npz"});
}

TEST_CASE("npz keeps dotted parameter names and their order", "[npz]") {
  const std::vector<std::string> names = {"tok_emb.weight",
                                          "blocks.0.attn.Wq",
                                          "blocks.0.attn.Wk",
                                          "blocks.10.mlp.fc1.bias",
                                          "config.d_model",
                                          "a..b.",
                                          ".x"};
  std::vector<NpzEntry> entries;
  for (std::size_t i = 0; i < names.size(); ++i)
    entries.emplace_back(names[i], xt::xarray<double>{double(i), -double(i)});
  const auto back = load_npz_bytes(save_npz_bytes(entries));
  REQUIRE(back.size() == names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    CHECK(back[i].name == names[i]);
    CHECK(back[i].as<double>()(1) == -double(i));
  }
  REQUIRE(find_npz_entry(back, "blocks.0.attn.Wk") != nullptr);
  CHECK(find_npz_entry(back, "blocks.0.attn.Wk")->as<double>()(0) == 2.0);
  CHECK(find_npz_entry(back, "blocks.0.attn") == nullptr);
}

TEST_CASE("npz entry as<T> names the entry and both dtypes on a mismatch", "[npz]") {
  NpzEntry e("blocks.1.ln.gain", xt::xarray<double>{1.0});
  CHECK(e.holds<double>());
  CHECK_FALSE(e.holds<float>());
  CHECK(e.dtype() == NpzDtype::float64);
  require_npz_error([&] { (void)e.as<float>(); }, {"blocks.1.ln.gain", "float64", "float32"});
  require_npz_error([&] { (void)e.as<std::int64_t>(); }, {"float64", "int64"});
  CHECK(e.as<double>()(0) == 1.0);
}

TEST_CASE("npz reads files written by numpy.savez and savez_compressed", "[npz]") {
  // Expected values: see tests/check_npz_with_numpy.py, which wrote these files.
  for (const char* file : {"numpy_savez.npz", "numpy_savez_compressed.npz"}) {
    INFO(file);
    const auto e = load_npz(kFixtures + "/" + file);
    REQUIRE(e.size() == 10);
    std::vector<std::string> names;
    for (const auto& x : e) names.push_back(x.name);
    CHECK(names == std::vector<std::string>{"blocks.0.attn.Wq", "special", "ids", "scalar",
                                            "fortran", "big_endian", "small_ints", "flags", "empty",
                                            "rank4"});

    CHECK((e[0].as<float>() == xt::xarray<float>{{-0.5f, -0.25f, 0.0f}, {0.25f, 0.5f, 0.75f}}));

    const auto& s = e[1].as<double>();
    REQUIRE(s.size() == 7);
    CHECK((s(0) == 0.0 && std::signbit(s(0))));
    CHECK(s(1) == std::numeric_limits<double>::infinity());
    CHECK(s(2) == -std::numeric_limits<double>::infinity());
    CHECK(std::isnan(s(3)));
    CHECK(s(4) == std::numeric_limits<double>::denorm_min());
    CHECK(s(5) == 1.5);
    CHECK(s(6) == -2.25);

    CHECK((e[2].as<std::int64_t>() ==
           xt::xarray<std::int64_t>{std::numeric_limits<std::int64_t>::min(), -1, 0,
                                    std::numeric_limits<std::int64_t>::max()}));
    CHECK(e[3].shape().empty());
    CHECK(e[3].as<double>()() == 2.5);

    // Fortran order comes back as the same logical array, row-major.
    const auto& f = e[4].as<double>();
    REQUIRE(e[4].shape() == std::vector<std::size_t>{2, 3, 4});
    for (std::size_t i = 0; i < 2; ++i)
      for (std::size_t j = 0; j < 3; ++j)
        for (std::size_t k = 0; k < 4; ++k) CHECK(f(i, j, k) == double(100 * i + 10 * j + k));
    CHECK(f.data()[1] == 1.0);  // row-major storage: [0,0,1] follows [0,0,0]

    CHECK((e[5].as<double>() == xt::xarray<double>{1.5, -2.0}));  // '>f8' byte-swapped
    CHECK(
        (e[6].as<std::int64_t>() == xt::xarray<std::int64_t>{1, -2, 2147483647}));  // '<i4' widened
    CHECK((e[7].as<std::int64_t>() == xt::xarray<std::int64_t>{1, 0, 1}));          // '|b1'
    CHECK(e[8].shape() == std::vector<std::size_t>{0, 3});
    CHECK(e[8].holds<float>());
    REQUIRE(e[9].shape() == std::vector<std::size_t>{2, 1, 3, 2});
    for (std::size_t n = 0; n < 12; ++n) CHECK(e[9].as<float>().data()[n] == float(n) - 5.5f);
  }
  // numpy.savez() of nothing is a valid empty archive.
  CHECK(load_npz(kFixtures + "/numpy_empty.npz").empty());
}

TEST_CASE("numpy.load reads what save_npz writes", "[npz]") {
  if (!have_numpy()) {
    WARN("SKIPPED: /usr/bin/python3 with numpy is not available");
    return;
  }
  // The same arrays as check() in tests/check_npz_with_numpy.py computes with numpy.
  std::vector<NpzEntry> entries;
  entries.emplace_back("blocks.0.attn.Wq",
                       filled<float>({3, 4}, [](std::size_t n) { return float(n) * 0.25f - 1; }));
  entries.emplace_back("special",
                       xt::xarray<double>{-0.0, std::numeric_limits<double>::infinity(),
                                          -std::numeric_limits<double>::infinity(),
                                          std::numeric_limits<double>::quiet_NaN(), 5e-324, -1.0});
  entries.emplace_back("step", xt::xarray<std::int64_t>(std::int64_t{1234567890123}));
  entries.emplace_back(
      "rank4", filled<double>({2, 3, 1, 4}, [](std::size_t n) { return double(n) * 0.5 - 3; }));
  TempDir dir;
  for (bool compress : {false, true}) {
    const std::string path = dir.file(compress ? "deflated.npz" : "stored.npz");
    save_npz(path, entries, compress);
    const std::string out = dir.file("numpy.out");
    const std::string cmd = "/usr/bin/python3 " + std::string(TAPEGRAD_SOURCE_DIR) +
                            "/tests/check_npz_with_numpy.py check '" + path + "' > '" + out +
                            "' 2>&1";
    const int rc = std::system(cmd.c_str());
    INFO("compress " << compress << "; numpy said: " << read_bytes(out));
    CHECK(rc == 0);
    CHECK(read_bytes(out).find("npz-check: OK") != std::string::npos);
  }
}

TEST_CASE("npz rejects a missing file an empty file and a directory", "[npz]") {
  TempDir dir;
  require_npz_error([&] { load_npz(dir.file("nope.npz")); }, {"nope.npz", "cannot open"});
  write_bytes(dir.file("empty.npz"), "");
  require_npz_error([&] { load_npz(dir.file("empty.npz")); }, {"empty.npz", "empty"});
  require_npz_error([&] { load_npz(dir.path.string()); }, {"not a regular file"});
  require_npz_error([] { load_npz_bytes("", "label-x"); }, {"label-x"});
  require_npz_error([] { load_npz_bytes("PK\x03\x04 this is not a zip", "junk"); },
                    {"junk", "zip"});
}

TEST_CASE("npz rejects a file truncated at any length", "[npz]") {
  std::vector<NpzEntry> entries;
  entries.emplace_back("w", xt::xarray<float>{{1, 2, 3}, {4, 5, 6}});
  entries.emplace_back("b", xt::xarray<std::int64_t>{7, 8});
  for (bool compress : {false, true}) {
    const std::string full = save_npz_bytes(entries, compress);
    REQUIRE(same_entries(load_npz_bytes(full), entries));
    int rejected = 0;
    for (std::size_t cut = 0; cut < full.size(); ++cut) {
      INFO("compress " << compress << " cut at " << cut << " of " << full.size());
      CHECK_THROWS_AS(load_npz_bytes(std::string_view(full).substr(0, cut), "cut"), NpzError);
      ++rejected;
    }
    CHECK(rejected == int(full.size()));
  }
}

TEST_CASE("npz with any single byte flipped throws or loads the same arrays", "[npz]") {
  // Flipping a byte that libzip does not read (a timestamp, "version made by") may leave a
  // valid archive; anything else must be caught: the CRC guards the npy bytes and
  // ZIP_CHECKCONS the local headers. What must never happen is different arrays.
  std::vector<NpzEntry> entries;
  entries.emplace_back("blocks.0.w", xt::xarray<float>{{1.5f, -2}, {0, 4}});
  entries.emplace_back("step", xt::xarray<std::int64_t>(std::int64_t{3}));
  for (bool compress : {false, true}) {
    const std::string full = save_npz_bytes(entries, compress);
    int thrown = 0, same = 0;
    for (std::size_t i = 0; i < full.size(); ++i) {
      for (unsigned char mask : {0x01, 0x80, 0xff}) {
        std::string bad = full;
        bad[i] = static_cast<char>(bad[i] ^ mask);
        try {
          const auto back = load_npz_bytes(bad, "flipped");
          INFO("compress " << compress << " byte " << i << " mask " << int(mask));
          CHECK(same_entries(back, entries));
          ++same;
        } catch (const NpzError&) {
          ++thrown;
        }
      }
    }
    CHECK(thrown + same == int(3 * full.size()));
    CHECK(thrown > same);  // most bytes matter
  }
}

TEST_CASE("npz rejects each damaged or unsupported fixture with a clear message", "[npz]") {
  struct Case {
    const char* file;
    std::vector<std::string> parts;  // beyond the file name
  };
  const std::vector<Case> cases = {
      {"bad_not_npy_member.npz", {"README.txt", "not an .npy member"}},
      {"bad_magic.npz", {"w.npy", "bad magic"}},
      {"bad_huge_shape.npz", {"w.npy", "(1048576,1048576)", "needs 4398046511104", "holds 16"}},
      {"bad_overflow_shape.npz", {"w.npy", "overflows"}},
      {"bad_shape_payload_mismatch.npz", {"w.npy", "needs 12", "holds 8"}},
      {"bad_complex_dtype.npz", {"z.npy", "unsupported dtype '<c16'"}},
      {"bad_object_dtype.npz", {"o.npy", "unsupported dtype '|O'"}},
      {"bad_structured_dtype.npz", {"s.npy", "structured"}},
      {"bad_extra_key.npz", {"w.npy", "unexpected key 'x'"}},
      {"bad_path_name.npz", {"../evil.npy", "'/'"}},
      {"bad_bzip2_member.npz", {"w.npy", "compression method 12"}},
      {"bad_duplicate_member.npz",
       {"not a valid zip archive", "already exists"}},  // libzip refuses it
  };
  for (const auto& c : cases) {
    INFO(c.file);
    std::vector<std::string> parts = c.parts;
    parts.push_back(c.file);
    require_npz_error([&] { load_npz(kFixtures + "/" + c.file); }, parts);
  }
}

TEST_CASE("npy header parser accepts numpy's grammar and rejects everything else", "[npz]") {
  const std::string two_f4("\0\0\x80\x3f\0\0\0\x40", 8);  // 1.0f, 2.0f little-endian
  // accepted: versions 1.0 and 2.0, double quotes, no trailing comma, extra spaces
  for (const std::string& dict :
       {std::string("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"),
        std::string("{\"descr\":\"<f4\",\"fortran_order\":False,\"shape\":(2,)}"),
        std::string("{ 'shape' : ( 2 , ) , 'fortran_order' : True , 'descr' : '<f4' }")}) {
    INFO(dict);
    for (int major : {1, 2, 3}) {
      const auto a = load_npy_bytes(raw_npy(dict, two_f4, major));
      REQUIRE(std::holds_alternative<xt::xarray<float>>(a));
      CHECK((std::get<xt::xarray<float>>(a) == xt::xarray<float>{1.0f, 2.0f}));
    }
  }
  struct Bad {
    std::string npy;
    std::string part;
  };
  const std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }";
  std::string v1 = raw_npy(ok, two_f4);
  std::string bad_version = v1;
  bad_version[6] = 4;
  std::string long_header = v1;
  long_header[8] = '\xff';
  long_header[9] = '\xff';
  const std::vector<Bad> bads = {
      {"", "bad magic"},
      {"\x93NUMPY", "bad magic"},
      {std::string("\x93NUMPY\x01\x00\x05", 9), "truncated npy header"},
      {bad_version, "version 4.0"},
      {long_header, "header claims 65535 bytes"},
      {raw_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2), }", two_f4), "not a tuple"},
      {raw_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", two_f4),
       "non-negative"},
      {raw_npy("{'descr': '<f4', 'fortran_order': false, 'shape': (2,), }", two_f4),
       "True nor False"},
      {raw_npy("{'descr': '<f4', 'fortran_order': False, }", two_f4), "lacks"},
      {raw_npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", two_f4),
       "twice"},
      {raw_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x", two_f4),
       "after the header"},
      {raw_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)", two_f4), "expected"},
      {raw_npy("{'descr': '<f\\4', 'fortran_order': False, 'shape': (2,), }", two_f4),
       "unsupported character"},
      {raw_npy("{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", two_f4),
       "unsupported dtype '<f2'"},
      {raw_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }",
               two_f4),
       "64 bits"},
      {raw_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 9223372036854775807), }", ""),
       "overflows"},
      {raw_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", two_f4 + "x"),
       "holds 9"},
      {raw_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (  ), }", ""), "needs 4"},
  };
  for (const auto& b : bads) {
    INFO("npy bytes: " << b.npy.substr(0, 90));
    require_npz_error([&] { load_npy_bytes(b.npy, "unit"); }, {"unit", b.part});
  }
  std::string rank33 = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
  for (int i = 0; i < 33; ++i) rank33 += "1,";
  require_npz_error([&] { load_npy_bytes(raw_npy(rank33 + "), }", std::string(4, '\0')), "u"); },
                    {"more than 32"});
}

TEST_CASE("npy reader survives random mutations of a valid array", "[npz]") {
  // A small in-test fuzz of the header parser (inside an npz the CRC shields it from
  // byte flips). Every outcome is NpzError or an array no larger than its bytes allow.
  const std::string base = raw_npy("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }",
                                   std::string(48, '\x11'));
  REQUIRE_NOTHROW(load_npy_bytes(base));
  std::mt19937_64 rng(20240607);
  static const char kAlphabet[] = "0123456789(),: '\"{}TrueFalse<>|f4i8b1\x93NUMPY\n\0\xff";
  const std::string alphabet(kAlphabet, sizeof(kAlphabet) - 1);
  int ok = 0, rejected = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string m = base;
    const int edits = 1 + int(rng() % 4);
    for (int k = 0; k < edits; ++k) {
      const std::size_t at = rng() % (m.size() + 1);
      switch (rng() % 4) {
        case 0:
          if (at < m.size()) m[at] = alphabet[rng() % alphabet.size()];
          break;
        case 1: m.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
        case 2:
          if (at < m.size()) m.erase(at, 1 + rng() % 8);
          break;
        case 3: m.resize(at); break;
      }
    }
    try {
      const auto a = load_npy_bytes(m, "mutant");
      const std::size_t bytes = std::visit([](const auto& x) { return x.size() * 8; }, a);
      CHECK(bytes <= 8 * m.size());
      ++ok;
    } catch (const NpzError&) {
      ++rejected;
    }
  }
  CHECK(ok + rejected == 20000);
  CHECK(ok > 0);
  CHECK(rejected > 0);
}

TEST_CASE("save_npz rejects bad entry names and saves nothing", "[npz]") {
  TempDir dir;
  const std::string path = dir.file("ckpt.npz");
  auto one = [](const std::string& name) {
    return std::vector<NpzEntry>{NpzEntry(name, xt::xarray<float>{1.0f})};
  };
  require_npz_error([&] { save_npz(path, one("")); }, {"ckpt.npz", "empty entry name"});
  require_npz_error([&] { save_npz(path, one("a/b")); }, {"'a/b'", "'/'"});
  require_npz_error([&] { save_npz(path, one("a\\b")); }, {"'a\\b'"});
  require_npz_error([&] { save_npz(path, one(std::string("a\0b", 3))); }, {"'a\\x00b'"});
  require_npz_error([&] { save_npz(path, one(std::string(1025, 'n'))); }, {"1024"});
  std::vector<NpzEntry> dup = one("w");
  dup.emplace_back("w", xt::xarray<double>{2.0});
  require_npz_error([&] { save_npz(path, dup); }, {"'w'", "twice"});
  require_npz_error([&] { save_npz(path, {}); }, {"no entries"});
  CHECK(dir.listing().empty());
}

TEST_CASE("a failed save_npz leaves the previous file intact and no temporary file", "[npz]") {
  TempDir dir;
  const std::string path = dir.file("model.npz");
  std::vector<NpzEntry> v1;
  v1.emplace_back("w", xt::xarray<double>{1.0, 2.0, 3.0});
  save_npz(path, v1);
  const std::string before = read_bytes(path);
  // A big second version whose write will be cut short.
  std::vector<NpzEntry> v2;
  v2.emplace_back("w", filled<double>({64, 1024}, [](std::size_t n) { return double(n); }));

  SECTION("an invalid entry name") {
    std::vector<NpzEntry> bad = v2;
    bad.emplace_back("x/y", xt::xarray<float>{1.0f});
    require_npz_error([&] { save_npz(path, bad); }, {"model.npz", "'x/y'"});
  }
  SECTION("the write fails midway (file size limit)") {
    // RLIMIT_FSIZE binds root too: write() fails with EFBIG once the temporary file
    // reaches 4 KiB, which is what a full disk does to a save.
    struct rlimit old_limit;
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
    auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = old_limit;
    small.rlim_cur = 4096;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    bool threw = false;
    std::string msg;
    try {
      save_npz(path, v2);
    } catch (const NpzError& e) {
      threw = true;
      msg = e.what();
    }
    ::setrlimit(RLIMIT_FSIZE, &old_limit);
    std::signal(SIGXFSZ, old_handler);
    INFO(msg);
    CHECK(threw);
    CHECK(msg.find("model.npz") != std::string::npos);
    CHECK(msg.find("write") != std::string::npos);
  }
  SECTION("the rename fails (the target is a directory)") {
    const std::string target = dir.file("model.npz.d");
    fs::create_directory(target);
    write_bytes(target + "/keep", "x");
    require_npz_error([&] { save_npz(target, v2); }, {"model.npz.d", "rename"});
    CHECK(read_bytes(target + "/keep") == "x");
    fs::remove_all(target);
  }
  CHECK(read_bytes(path) == before);
  CHECK(same_entries(load_npz(path), v1));
  CHECK(dir.listing() == std::set<std::string>{"model.npz"});

  // and a save that succeeds replaces it
  save_npz(path, v2);
  CHECK(same_entries(load_npz(path), v2));
  CHECK(dir.listing() == std::set<std::string>{"model.npz"});
}

TEST_CASE("save_npz into a missing directory names the path", "[npz]") {
  TempDir dir;
  const std::string path = dir.file("no/such/dir/ckpt.npz");
  std::vector<NpzEntry> e;
  e.emplace_back("w", xt::xarray<float>{1.0f});
  require_npz_error([&] { save_npz(path, e); }, {"save_npz", path, "No such file or directory"});
  CHECK(dir.listing().empty());
}

TEST_CASE("save_npz output is the same bytes for the same arrays", "[npz]") {
  // A fixed member time makes checkpoints of identical weights identical files.
  const auto e = mixed_entries();
  const std::string a = save_npz_bytes(e);
  TempDir dir;
  save_npz(dir.file("x.npz"), e);
  CHECK(read_bytes(dir.file("x.npz")) == a);
}
