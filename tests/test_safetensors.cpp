// safetensors: round trips, files laid out by hand from the format's spec (as the reference
// library writes them), the writer's exact bytes, the BF16/F16 widening, every refusal of a
// damaged header with the file and the tensor named, and sharded folders.
#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <system_error>
#include <vector>

#include "nn/io/safetensors.hpp"
#include "temp_files.hpp"

using namespace tapegrad;
using test::TempDir;
using test::read_bytes;
using test::write_bytes;
namespace fs = std::filesystem;

namespace {

// The byte builders: little-endian values, as the spec lays them out.
std::string u64le(std::uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

template <class T>
std::string raw(std::initializer_list<T> values) {
  std::string s;
  for (T v : values) s.append(reinterpret_cast<const char*>(&v), sizeof v);
  return s;
}

std::string file_bytes(const std::string& header, const std::string& buffer) {
  return u64le(header.size()) + header + buffer;
}

// The SafetensorsError message of `call`, or "" when it throws none.
template <class Call>
std::string error_of(Call call) {
  try {
    call();
  } catch (const SafetensorsError& e) {
    return e.what();
  }
  return "";
}

void require_error(const std::string& message, const std::vector<std::string>& parts) {
  INFO("message: " << message);
  REQUIRE(!message.empty());
  for (const std::string& part : parts) {
    INFO("expected part: " << part);
    CHECK(message.find(part) != std::string::npos);
  }
}

template <class T>
std::vector<T> read_all(const SafetensorsFile& f, const std::string& name) {
  const SafetensorsTensor* t = f.find(name);
  REQUIRE(t != nullptr);
  std::vector<T> out(t->elements());
  f.read(name, out.data());
  return out;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

}  // namespace

TEMPLATE_TEST_CASE("safetensors: a save and open round trip keeps every bit", "[safetensors]",
                   float, double) {
  using T = TestType;
  TempDir dir;
  std::vector<T> odd(3 * 5 * 7);
  for (std::size_t i = 0; i < odd.size(); ++i) odd[i] = T(i) / T(7) - T(3);
  std::vector<T> special = {std::numeric_limits<T>::infinity(), -T(0),
                            std::numeric_limits<T>::quiet_NaN(),
                            std::numeric_limits<T>::denorm_min(), std::numeric_limits<T>::max()};
  const T scalar = T(-2.5);
  const std::string path = dir.file("m.safetensors");
  save_safetensors<T>(path, {{"odd", {3, 5, 7}, odd.data()},
                             {"scalar", {}, &scalar},
                             {"empty", {0, 4}, nullptr},
                             {"special", {5}, special.data()}});
  const SafetensorsFile f(path);
  REQUIRE(f.tensors().size() == 4);
  CHECK(f.tensors()[0].name == "empty");
  CHECK(f.tensors()[3].name == "special");
  const char* dtype = std::is_same_v<T, float> ? "F32" : "F64";
  for (const SafetensorsTensor& t : f.tensors()) CHECK(t.dtype == dtype);
  CHECK(f.find("odd")->shape == std::vector<std::size_t>{3, 5, 7});
  CHECK(f.find("scalar")->shape.empty());
  CHECK(f.find("scalar")->elements() == 1);
  CHECK(f.find("empty")->elements() == 0);
  CHECK(f.find("missing") == nullptr);
  CHECK(f.metadata() == std::map<std::string, std::string>{{"format", "pt"}});
  CHECK(same_bits(read_all<T>(f, "odd"), odd));
  CHECK(same_bits(read_all<T>(f, "special"), special));
  CHECK(read_all<T>(f, "scalar") == std::vector<T>{scalar});
  CHECK(read_all<T>(f, "empty").empty());
  // The file is 8-aligned after the header, as the reference pads it.
  const std::string bytes = read_bytes(path);
  std::uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  CHECK(header % 8 == 0);
  CHECK(bytes.size() == 8 + header + (odd.size() + special.size() + 1) * sizeof(T));
}

TEST_CASE("safetensors: the writer's bytes are the spec's, byte for byte", "[safetensors]") {
  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  const float b[] = {1.5f, -2.0f};
  const float a = 0.25f;
  save_safetensors<float>(path, {{"b", {2}, b}, {"a", {}, &a}});
  const std::string header =
      "{\"__metadata__\":{\"format\":\"pt\"},"
      "\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}"
      "      ";  // 138 bytes of JSON, padded to 144
  CHECK(read_bytes(path) == file_bytes(header, raw<float>({0.25f, 1.5f, -2.0f})));

  // No metadata: no __metadata__ key; F64 for double.
  const double d = 3.0;
  save_safetensors<double>(path, {{"x", {1, 1}, &d}}, {});
  CHECK(read_bytes(path) ==
        file_bytes("{\"x\":{\"dtype\":\"F64\",\"shape\":[1,1],\"data_offsets\":[0,8]}}",
                   raw<double>({3.0})));
  CHECK(dir.entries() == 1);  // no temporary file left
}

TEST_CASE("safetensors: a tensor produced while the file is written gives the same bytes",
          "[safetensors]") {
  TempDir dir;
  const float b[] = {1.5f, -2.0f};
  const float a = 0.25f;
  save_safetensors<float>(dir.file("held.safetensors"), {{"b", {2}, b}, {"a", {}, &a}});
  int calls = 0;
  const std::function<void(float*)> make_b = [&](float* out) {
    ++calls;
    out[0] = 1.5f;
    out[1] = -2.0f;
  };
  save_safetensors<float>(dir.file("filled.safetensors"), {{"b", {2}, make_b}, {"a", {}, &a}});
  CHECK(calls == 1);
  CHECK(read_bytes(dir.file("filled.safetensors")) == read_bytes(dir.file("held.safetensors")));
  const std::function<void(float*)> none;
  CHECK_THROWS_WITH(save_safetensors<float>(dir.file("x.safetensors"), {{"c", {2}, none}}),
                    Catch::Contains("tensor 'c': no data"));
}

TEST_CASE("safetensors: a file laid out as the reference writes it is read", "[safetensors]") {
  // Header order differs from the offsets' (accepted, as the reference does), no padding,
  // mixed dtypes, a zero-size tensor sharing an offset, metadata.
  const std::string header =
      "{\"z\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"a\":{\"shape\":[1],\"dtype\":\"F64\",\"data_offsets\":[8,16]},"
      "\"n\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[16,24]},"
      "\"e\":{\"dtype\":\"BF16\",\"shape\":[3,0],\"data_offsets\":[8,8]},"
      "\"__metadata__\":{\"format\":\"np\",\"note\":\"x\"}}";
  const std::string bytes =
      file_bytes(header, raw<float>({1.0f, -0.5f}) + raw<double>({0.1}) + raw<std::int64_t>({7}));
  const SafetensorsFile f = SafetensorsFile::from_bytes(bytes, "'ref.safetensors'");
  REQUIRE(f.tensors().size() == 4);
  CHECK(f.tensors()[0].name == "a");
  CHECK(f.find("n")->dtype == "I64");
  CHECK(f.find("e")->shape == std::vector<std::size_t>{3, 0});
  CHECK(f.metadata().at("format") == "np");
  CHECK(read_all<double>(f, "z") == std::vector<double>{1.0, -0.5});
  CHECK(read_all<double>(f, "a") == std::vector<double>{0.1});
  CHECK(read_all<float>(f, "a") == std::vector<float>{0.1f});  // rounded to nearest
  CHECK(read_all<float>(f, "e").empty());
  require_error(error_of([&] { read_all<float>(f, "n"); }),
                {"'ref.safetensors'", "tensor 'n'", "I64", "not a float"});
  require_error(error_of([&] { f.read<float>("nope", nullptr); }),
                {"'ref.safetensors'", "tensor 'nope'", "no such tensor"});
  CHECK(safetensors_float_dtype("BF16"));
  CHECK_FALSE(safetensors_float_dtype("I64"));
}

TEST_CASE("safetensors: BF16 and F16 widen exactly", "[safetensors]") {
  const std::vector<std::uint16_t> bf16 = {0x3f80, 0xc000, 0x8000, 0x7f80,
                                           0xff80, 0x7fc0, 0x0001, 0x4049};
  const std::vector<std::uint16_t> f16 = {0x3c00, 0x0001, 0x03ff, 0x0400, 0x7bff, 0x7c00,
                                          0xfc00, 0x7e00, 0x8000, 0xc000, 0x3555, 0x8001};
  std::string buffer;
  for (auto v : bf16) buffer += raw<std::uint16_t>({v});
  for (auto v : f16) buffer += raw<std::uint16_t>({v});
  const std::string header =
      "{\"b\":{\"dtype\":\"BF16\",\"shape\":[8],\"data_offsets\":[0,16]},"
      "\"h\":{\"dtype\":\"F16\",\"shape\":[12],\"data_offsets\":[16,40]}}";
  const SafetensorsFile f = SafetensorsFile::from_bytes(file_bytes(header, buffer), "'halves'");
  const float inf = std::numeric_limits<float>::infinity();

  const auto b = read_all<float>(f, "b");
  CHECK(b[0] == 1.0f);
  CHECK(b[1] == -2.0f);
  CHECK((b[2] == 0.0f && std::signbit(b[2])));
  CHECK(b[3] == inf);
  CHECK(b[4] == -inf);
  CHECK(std::isnan(b[5]));
  CHECK(b[6] == std::ldexp(1.0f, -133));  // the smallest BF16 subnormal
  CHECK(b[7] == 3.140625f);

  for (const auto& h : {read_all<double>(f, "h"), [&] {
                          const auto v = read_all<float>(f, "h");
                          return std::vector<double>(v.begin(), v.end());
                        }()}) {
    CHECK(h[0] == 1.0);
    CHECK(h[1] == std::ldexp(1.0, -24));         // the smallest subnormal
    CHECK(h[2] == 1023 * std::ldexp(1.0, -24));  // the largest subnormal
    CHECK(h[3] == std::ldexp(1.0, -14));         // the smallest normal
    CHECK(h[4] == 65504.0);
    CHECK(h[5] == double(inf));
    CHECK(h[6] == -double(inf));
    CHECK(std::isnan(h[7]));
    CHECK((h[8] == 0.0 && std::signbit(h[8])));
    CHECK(h[9] == -2.0);
    CHECK(h[10] == 0.333251953125);
    CHECK(h[11] == -std::ldexp(1.0, -24));
  }
}

namespace {

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":" + dtype + ",\"shape\":" + shape +
         ",\"data_offsets\":" + offsets + "}";
}

struct BadFile {
  const char* what;
  std::string bytes;
  std::vector<std::string> parts;  // besides the file's name
};

std::vector<BadFile> bad_files() {
  const std::string eight(8, '\0');
  const std::string good_a = entry("a", "\"F32\"", "[2]", "[0,8]");
  const auto one = [&](const std::string& body, const std::string& buffer = std::string(8, '\0')) {
    return file_bytes("{" + body + "}", buffer);
  };
  return {
      {"shorter than 8 bytes", "abc", {"3 bytes, shorter than the 8-byte header length"}},
      {"header over the limit", u64le(kSafetensorsMaxHeader + 1) + "{}", {"over the limit"}},
      {"header past the end", u64le(50) + "{}", {"header length 50 runs past the file's end"}},
      {"not JSON", file_bytes("{not json", ""), {"not valid UTF-8 JSON"}},
      {"not UTF-8", one("\"a\xff\":{}"), {"not valid UTF-8 JSON"}},
      {"not an object", file_bytes("[1,2]", ""), {"not a JSON object"}},
      {"a duplicate name",
       one(good_a + "," + entry("a", "\"F32\"", "[2]", "[0,8]")),
       {"'a' appears twice"}},
      {"a duplicate field",
       one("\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\"}"),
       {"'dtype' appears twice"}},
      {"entry not an object", one("\"a\":3"), {"tensor 'a'", "not a JSON object"}},
      {"no dtype",
       one("\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}"),
       {"tensor 'a'", "no \"dtype\""}},
      {"no shape",
       one("\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}"),
       {"tensor 'a'", "no \"shape\""}},
      {"no data_offsets",
       one("\"a\":{\"dtype\":\"F32\",\"shape\":[2]}"),
       {"tensor 'a'", "no \"data_offsets\""}},
      {"dtype not a string",
       one(entry("a", "4", "[2]", "[0,8]")),
       {"tensor 'a'", "dtype is not a string"}},
      {"unknown dtype",
       one(entry("a", "\"float32\"", "[2]", "[0,8]")),
       {"tensor 'a'", "unknown dtype 'float32'"}},
      {"shape not a list",
       one(entry("a", "\"F32\"", "2", "[0,8]")),
       {"tensor 'a'", "shape is not a list"}},
      {"negative dimension",
       one(entry("a", "\"F32\"", "[-2]", "[0,8]")),
       {"tensor 'a'", "shape holds '-2', not a non-negative integer"}},
      {"fractional dimension",
       one(entry("a", "\"F32\"", "[2.0]", "[0,8]")),
       {"tensor 'a'", "not a non-negative integer"}},
      {"dimension as a string",
       one(entry("a", "\"F32\"", "[\"2\"]", "[0,8]")),
       {"tensor 'a'", "not a non-negative integer"}},
      {"three offsets",
       one(entry("a", "\"F32\"", "[2]", "[0,8,8]")),
       {"tensor 'a'", "data_offsets is not a list of two integers"}},
      {"negative offset",
       one(entry("a", "\"F32\"", "[2]", "[-8,0]")),
       {"tensor 'a'", "data_offsets holds '-8'"}},
      {"begin after end",
       one(entry("a", "\"F32\"", "[2]", "[8,0]")),
       {"tensor 'a'", "begins after it ends"}},
      {"size not the shape's",
       one(entry("a", "\"F32\"", "[3]", "[0,8]")),
       {"tensor 'a'", "hold 8 bytes, but shape [3] of F32 takes 12"}},
      {"shape overflows",
       one(entry("a", "\"F64\"", "[4294967296,4294967296]", "[0,8]")),
       {"tensor 'a'", "overflows a 64-bit byte count"}},
      {"a hole before a tensor",
       one(entry("a", "\"F32\"", "[1]", "[4,8]")),
       {"tensor 'a'", "a hole of 4 bytes"}},
      {"overlapping tensors",
       one(good_a + "," + entry("b", "\"F32\"", "[2]", "[4,12]"), std::string(12, '\0')),
       {"tensor 'b'", "overlap"}},
      {"trailing bytes", one(good_a, std::string(12, '\0')), {"4 trailing bytes"}},
      {"data past the end",
       one(good_a, std::string(4, '\0')),
       {"tensor 'a'", "run past the data's end"}},
      {"metadata not an object",
       one(good_a + ",\"__metadata__\":[]"),
       {"__metadata__ is not an object"}},
      {"metadata value not a string",
       one(good_a + ",\"__metadata__\":{\"k\":1}"),
       {"__metadata__ 'k' is not a string"}},
      {"nested too deep", one(entry("a", "\"F32\"", "[[2]]", "[0,8]")), {"nests deeper than 3"}},
  };
}

}  // namespace

TEST_CASE("safetensors: every damaged header is refused naming the file and the tensor",
          "[safetensors]") {
  TempDir dir;
  const std::string path = dir.file("bad.safetensors");
  for (const BadFile& bad : bad_files()) {
    INFO(bad.what);
    write_bytes(path, bad.bytes);
    std::vector<std::string> parts = bad.parts;
    parts.push_back("safetensors '" + path + "'");
    require_error(error_of([&] { SafetensorsFile f(path); }), parts);
    parts.back() = "safetensors 'fuzz input'";
    require_error(error_of([&] { SafetensorsFile::from_bytes(bad.bytes, "'fuzz input'"); }), parts);
  }
  require_error(error_of([&] { SafetensorsFile f(dir.file("none.safetensors")); }),
                {"none.safetensors", "cannot open"});
  require_error(error_of([&] { SafetensorsFile f(dir.path.string()); }), {"not a regular file"});
  write_bytes(path, "");
  require_error(error_of([&] { SafetensorsFile f(path); }), {"0 bytes, shorter than"});
}

TEST_CASE("safetensors: every known dtype is listed, the rest refused", "[safetensors]") {
  const std::pair<const char*, int> dtypes[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};
  for (const auto& [dtype, size] : dtypes) {
    INFO(dtype);
    const std::string header = "{" +
                               entry("t", std::string("\"") + dtype + "\"", "[3]",
                                     "[0," + std::to_string(3 * size) + "]") +
                               "}";
    const SafetensorsFile f =
        SafetensorsFile::from_bytes(file_bytes(header, std::string(3 * size, '\0')), "'d'");
    CHECK(f.find("t")->dtype == dtype);
  }
}

TEST_CASE("safetensors: save refuses bad names and reports a failed write", "[safetensors]") {
  TempDir dir;
  const std::string path = dir.file("out.safetensors");
  const float v = 1.0f;
  require_error(error_of([&] {
                  save_safetensors<float>(path, {{"a", {}, &v}, {"a", {}, &v}});
                }),
                {"out.safetensors", "tensor 'a'", "appears twice"});
  require_error(error_of([&] { save_safetensors<float>(path, {{"", {}, &v}}); }), {"empty name"});
  require_error(error_of([&] {
                  save_safetensors<float>(path, {{"__metadata__", {}, &v}});
                }),
                {"'__metadata__'", "reserved"});
  require_error(error_of([&] {
                  save_safetensors<float>(path, {{"a", {2}, nullptr}});
                }),
                {"tensor 'a'", "no data"});
  require_error(error_of([&] {
                  save_safetensors<float>(path, {{"a\xff", {}, &v}});
                }),
                {"not valid UTF-8"});
  CHECK(dir.entries() == 0);

  const std::string missing = dir.file("no/out.safetensors");
  bool threw = false;
  try {
    save_safetensors<float>(missing, {{"a", {}, &v}});
  } catch (const std::system_error& e) {
    threw = true;
    CHECK(e.code() == std::errc::no_such_file_or_directory);
    CHECK(std::string(e.what()).find("save_safetensors: '" + missing + "'") != std::string::npos);
  }
  CHECK(threw);
}

namespace {

// Writes a one-F32-tensor-per-name shard.
void write_shard(const std::string& path, const std::vector<std::string>& names) {
  std::vector<float> values(names.size());
  std::vector<SafetensorsSource<float>> sources;
  for (std::size_t i = 0; i < names.size(); ++i) {
    values[i] = float(i + 1);
    sources.push_back({names[i], {1}, &values[i]});
  }
  save_safetensors<float>(path, sources);
}

std::string index_json(const std::string& weight_map) {
  return "{\"metadata\":{\"total_size\":12},\"weight_map\":{" + weight_map + "}}";
}

}  // namespace

TEST_CASE("safetensors: a sharded folder reads as one", "[safetensors]") {
  TempDir dir;
  write_shard(dir.file("model-00001-of-00002.safetensors"), {"x", "y"});
  write_shard(dir.file("model-00002-of-00002.safetensors"), {"w"});
  write_bytes(dir.file("model.safetensors.index.json"),
              index_json("\"x\":\"model-00001-of-00002.safetensors\","
                         "\"w\":\"model-00002-of-00002.safetensors\","
                         "\"y\":\"model-00001-of-00002.safetensors\""));
  const SafetensorsFolder folder(dir.path.string());
  CHECK(folder.names() == std::vector<std::string>{"w", "x", "y"});
  CHECK(folder.file_of("w") == dir.file("model-00002-of-00002.safetensors"));
  CHECK(folder.find("y")->shape == std::vector<std::size_t>{1});
  CHECK(folder.find("z") == nullptr);
  double y = 0;
  folder.read("y", &y);
  CHECK(y == 2.0);
  require_error(error_of([&] { folder.read<float>("z", nullptr); }), {"'z'"});
  require_error(error_of([&] { folder.file_of("z"); }), {"'z'"});

  // A model.safetensors beside the index wins, as in transformers.
  write_shard(dir.file("model.safetensors"), {"only"});
  CHECK(SafetensorsFolder(dir.path.string()).names() == std::vector<std::string>{"only"});
}

TEST_CASE("safetensors: a folder's index and shards must agree", "[safetensors]") {
  TempDir dir;
  const std::string index = dir.file("model.safetensors.index.json");
  require_error(
      error_of([&] { SafetensorsFolder f(dir.path.string()); }),
      {"no model.safetensors or model.safetensors.index.json in '" + dir.path.string() + "'"});
  write_shard(dir.file("s1.safetensors"), {"a", "b"});
  write_shard(dir.file("s2.safetensors"), {"b", "c"});
  const struct {
    const char* what;
    std::string json;
    std::vector<std::string> parts;
  } cases[] = {
      {"not JSON", "{", {"not valid UTF-8 JSON"}},
      {"no weight_map", "{\"metadata\":{}}", {"no \"weight_map\" object"}},
      {"a duplicate name",
       index_json("\"a\":\"s1.safetensors\",\"a\":\"s1.safetensors\""),
       {"'a' appears twice"}},
      {"a file that is not a string", index_json("\"a\":1"), {"weight_map 'a' is not a file name"}},
      {"a shard outside the folder",
       index_json("\"a\":\"../s1.safetensors\""),
       {"'../s1.safetensors' is not a plain name"}},
      {"a shard in a subfolder",
       index_json("\"a\":\"sub/s1.safetensors\""),
       {"'sub/s1.safetensors' is not a plain name"}},
      {"the parent folder", index_json("\"a\":\"..\""), {"'..' is not a plain name"}},
      {"a tensor its shard lacks",
       index_json("\"a\":\"s1.safetensors\",\"b\":\"s1.safetensors\",\"q\":\"s1.safetensors\""),
       {"tensor 'q' in shard 's1.safetensors', which lacks it"}},
      {"a shard tensor the index does not list",
       index_json("\"a\":\"s1.safetensors\""),
       {"shard 's1.safetensors' holds tensor 'b', which the index does not list"}},
      {"a name in two shards",
       index_json("\"a\":\"s1.safetensors\",\"b\":\"s1.safetensors\",\"c\":\"s2.safetensors\""),
       {"tensor 'b' is in shard 's2.safetensors' too"}},
      {"a missing shard",
       index_json("\"a\":\"gone.safetensors\""),
       {"gone.safetensors", "cannot open"}},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    write_bytes(index, c.json);
    std::vector<std::string> parts = c.parts;
    if (std::string(c.what) != "a missing shard") parts.push_back("index '" + index + "'");
    require_error(error_of([&] { SafetensorsFolder f(dir.path.string()); }), parts);
  }
}

TEST_CASE("safetensors: a save cut short leaves the previous file and no temporary",
          "[safetensors]") {
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  const float one = 1.0f;
  save_safetensors<float>(path, {{"a", {}, &one}});
  const std::string before = read_bytes(path);
  const std::vector<float> big(1 << 16, 2.0f);
  // RLIMIT_FSIZE binds root too: write() fails with EFBIG once the temporary file reaches
  // 4 KiB, which is what a full disk does to a save.
  struct rlimit old_limit;
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_limit) == 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old_limit;
  small.rlim_cur = 4096;
  REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
  std::string message;
  try {
    save_safetensors<float>(path, {{"a", {big.size()}, big.data()}});
  } catch (const std::system_error& e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  INFO(message);
  CHECK(message.find("save_safetensors: '" + path + "': cannot write") != std::string::npos);
  CHECK(read_bytes(path) == before);
  CHECK(dir.entries() == 1);
}
