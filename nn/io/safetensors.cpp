// safetensors: the header's checks, the dtype conversions, sharded folders and the writer.
// Each check mirrors one of the reference reader's refusals, so a file this reader accepts
// is one the reference accepts too.
#include "nn/io/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <type_traits>

#include "autograd/errors.hpp"  // fail_with: messages built as the ops build theirs
#include "platform/file_io.hpp"
#include "nn/io/untrusted_text.hpp"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors buffers are little-endian and are read and written as memory");

namespace tapegrad {

using Json = nlohmann::json;

namespace {

struct Dtype {
  std::string_view name;
  std::uint64_t itemsize;
};

// The reference's dtypes; read() converts the float ones (safetensors_float_dtype).
constexpr Dtype kDtypes[] = {{"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
                             {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
                             {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};

const Dtype* find_dtype(std::string_view name) {
  for (const Dtype& d : kDtypes)
    if (d.name == name) return &d;
  return nullptr;
}

// product(shape) x itemsize, or false when it overflows 64 bits (a 0 in the shape makes
// it 0 whatever the other dimensions).
bool byte_count(std::uint64_t itemsize, const std::vector<std::size_t>& shape,
                std::uint64_t* bytes) {
  *bytes = 0;
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return true;
  std::uint64_t n = itemsize;
  for (std::size_t d : shape)
    if (__builtin_mul_overflow(n, std::uint64_t(d), &n)) return false;
  *bytes = n;
  return true;
}

std::string shape_text(const std::vector<std::size_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// A JSON text parsed with the two refusals nlohmann does not make: a key repeated in one
// object (nlohmann keeps the last) and nesting deeper than `max_depth` containers (the
// header's schema needs 3; a bound keeps a hostile header's parse cheap).
Json parse_json(std::string_view text, const std::string& where, int max_depth) {
  std::vector<std::set<std::string>> keys;  // those of each object still open
  const auto check = [&](int depth, Json::parse_event_t event, Json& parsed) {
    using Event = Json::parse_event_t;
    if ((event == Event::object_start || event == Event::array_start) && depth >= max_depth)
      fail_with<SafetensorsError>(where, "the JSON nests deeper than {} levels", max_depth);
    if (event == Event::object_start) keys.emplace_back();
    if (event == Event::object_end) keys.pop_back();
    if (event == Event::key && !keys.back().insert(parsed.get<std::string>()).second)
      fail_with<SafetensorsError>(where, "the name {} appears twice",
                                  detail::quoted(parsed.get<std::string>()));
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), check);
  } catch (const Json::exception& e) {
    fail_with<SafetensorsError>(where, "not valid UTF-8 JSON ({})", e.what());
  }
}

std::uint64_t json_count(const Json& value, const std::string& where, std::string_view field) {
  if (!value.is_number_unsigned())
    fail_with<SafetensorsError>(where, "{} holds {}, not a non-negative integer", field,
                                detail::quoted(value.dump()));
  return value.get<std::uint64_t>();
}

const Json& json_field(const Json& entry, const char* field, const std::string& where) {
  const auto it = entry.find(field);
  if (it == entry.end()) fail_with<SafetensorsError>(where, "has no \"{}\"", field);
  return *it;
}

SafetensorsTensor parse_entry(const std::string& name, const Json& entry,
                              const std::string& file_where) {
  const std::string where = file_where + ": tensor " + detail::quoted(name);
  if (!entry.is_object()) fail_with<SafetensorsError>(where, "the entry is not a JSON object");
  SafetensorsTensor t;
  t.name = name;
  const Json& dtype = json_field(entry, "dtype", where);
  if (!dtype.is_string()) fail_with<SafetensorsError>(where, "dtype is not a string");
  t.dtype = dtype.get<std::string>();
  const Dtype* known = find_dtype(t.dtype);
  if (!known) fail_with<SafetensorsError>(where, "unknown dtype {}", detail::quoted(t.dtype));

  const Json& shape = json_field(entry, "shape", where);
  if (!shape.is_array()) fail_with<SafetensorsError>(where, "shape is not a list");
  for (const Json& dim : shape)
    t.shape.push_back(static_cast<std::size_t>(json_count(dim, where, "shape")));
  const Json& offsets = json_field(entry, "data_offsets", where);
  if (!offsets.is_array() || offsets.size() != 2)
    fail_with<SafetensorsError>(where, "data_offsets is not a list of two integers");
  t.begin = json_count(offsets[0], where, "data_offsets");
  t.end = json_count(offsets[1], where, "data_offsets");
  if (t.begin > t.end)
    fail_with<SafetensorsError>(where, "data_offsets [{}, {}) begins after it ends", t.begin,
                                t.end);
  std::uint64_t bytes = 0;
  if (!byte_count(known->itemsize, t.shape, &bytes))
    fail_with<SafetensorsError>(where, "shape {} of {} overflows a 64-bit byte count",
                                shape_text(t.shape), t.dtype);
  if (t.end - t.begin != bytes)
    fail_with<SafetensorsError>(where,
                                "data_offsets [{}, {}) hold {} bytes, but shape {} of {} "
                                "takes {}",
                                t.begin, t.end, t.end - t.begin, shape_text(t.shape), t.dtype,
                                bytes);
  return t;
}

// The ranges must tile [0, buffer) exactly: no overlap, no hole, no trailing byte.
void check_tiling(const std::vector<SafetensorsTensor>& tensors, std::uint64_t buffer,
                  const std::string& where) {
  std::vector<const SafetensorsTensor*> by_offset;
  for (const SafetensorsTensor& t : tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const auto* a, const auto* b) {
    return std::tie(a->begin, a->end) < std::tie(b->begin, b->end);
  });
  std::uint64_t covered = 0;
  for (const SafetensorsTensor* t : by_offset) {
    if (t->begin > covered)
      fail_with<SafetensorsError>(where,
                                  "tensor {}: a hole of {} bytes before its data_offsets "
                                  "[{}, {})",
                                  detail::quoted(t->name), t->begin - covered, t->begin, t->end);
    if (t->begin < covered)
      fail_with<SafetensorsError>(where,
                                  "tensor {}: data_offsets [{}, {}) overlap another "
                                  "tensor's (which end at {})",
                                  detail::quoted(t->name), t->begin, t->end, covered);
    if (t->end > buffer)
      fail_with<SafetensorsError>(where,
                                  "tensor {}: data_offsets [{}, {}) run past the data's "
                                  "end ({} bytes)",
                                  detail::quoted(t->name), t->begin, t->end, buffer);
    covered = t->end;
  }
  if (covered != buffer)
    fail_with<SafetensorsError>(where, "{} trailing bytes after the last tensor's data",
                                buffer - covered);
}

// F16 to float, exactly: every half is a float.
float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = std::uint32_t(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1fu;
  const std::uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa x 2^-24
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  std::uint32_t bits = sign | (mantissa << 13);
  bits |= exponent == 0x1f ? 0x7f800000u : (exponent - 15 + 127) << 23;  // inf/NaN keep payload
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

float bf16_to_float(std::uint16_t h) {
  const std::uint32_t bits = std::uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Converts `count` little-endian `Stored` values at (possibly unaligned) `src` to T.
template <class Stored, class T, class Widen>
void convert(const char* src, std::size_t count, T* out, Widen widen) {
  for (std::size_t i = 0; i < count; ++i) {
    Stored v;
    std::memcpy(&v, src + i * sizeof(Stored), sizeof(Stored));
    out[i] = static_cast<T>(widen(v));
  }
}

template <class T>
void convert_chunk(const std::string& dtype, const char* src, std::size_t count, T* out) {
  const auto same = [](auto v) { return v; };
  if (dtype == "F32")
    convert<float>(src, count, out, same);
  else if (dtype == "F64")
    convert<double>(src, count, out, same);
  else if (dtype == "BF16")
    convert<std::uint16_t>(src, count, out, bf16_to_float);
  else
    convert<std::uint16_t>(src, count, out, half_to_float);
}

// The pages holding [at, at + bytes) of a mapped file are dropped from memory (a read-only
// private mapping reads them again from the file if touched); a neighbour's page too, which
// costs at most a second read of it.
void release_pages(const char* at, std::size_t bytes) {
  if (bytes == 0) return;
  static const std::uintptr_t page = std::uintptr_t(::sysconf(_SC_PAGESIZE));
  const std::uintptr_t begin = std::uintptr_t(at) & ~(page - 1);
  const std::uintptr_t end = std::uintptr_t(at) + bytes;
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace

// ---------------------------------------------------------------------------------------

std::size_t SafetensorsTensor::elements() const {
  std::size_t n = 1;
  for (std::size_t d : shape) n *= d;  // the header's check keeps this from overflowing
  return n;
}

bool safetensors_float_dtype(std::string_view dtype) {
  return dtype == "F64" || dtype == "F32" || dtype == "BF16" || dtype == "F16";
}

// The file's bytes: a read-only mapping, or bytes held in memory (from_bytes).
struct SafetensorsFile::Mapping {
  std::string owned;
  void* mapped = nullptr;
  std::size_t size = 0;
  const char* bytes = nullptr;
  const char* buffer = nullptr;  // the data buffer, past the header
  ~Mapping() {
    if (mapped) ::munmap(mapped, size);
  }
};

namespace {

// Checks the header of the file's `size` bytes and fills the tensors (sorted by name) and
// the metadata; returns where the data buffer starts.
std::uint64_t parse_file(const char* bytes, std::size_t size, const std::string& where,
                         std::vector<SafetensorsTensor>& tensors,
                         std::map<std::string, std::string>& metadata);

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path) {
  const std::string where = "safetensors '" + path + "'";
  // O_NONBLOCK: a FIFO opens at once (to be refused) instead of waiting for a writer
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) fail_with<SafetensorsError>(where, "cannot open: {}", std::strerror(errno));
  data_ = std::make_unique<Mapping>();
  struct stat sb;
  std::string err;
  if (::fstat(fd, &sb) != 0) {
    err = std::string("cannot stat: ") + std::strerror(errno);
  } else if (!S_ISREG(sb.st_mode)) {
    err = "not a regular file";
  } else if (sb.st_size > 0) {
    data_->size = static_cast<std::size_t>(sb.st_size);
    void* p = ::mmap(nullptr, data_->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED)
      err = std::string("cannot map: ") + std::strerror(errno);
    else
      data_->mapped = p;
  }
  ::close(fd);
  if (!err.empty()) fail_with<SafetensorsError>(where, "{}", err);
  data_->bytes = static_cast<const char*>(data_->mapped);
  data_->buffer = data_->bytes + parse_file(data_->bytes, data_->size, where, tensors_, metadata_);
}

SafetensorsFile SafetensorsFile::from_bytes(std::string bytes, const std::string& label) {
  SafetensorsFile f;
  f.path_ = label;
  f.data_ = std::make_unique<Mapping>();
  f.data_->owned = std::move(bytes);
  f.data_->size = f.data_->owned.size();
  f.data_->bytes = f.data_->owned.data();
  f.data_->buffer = f.data_->bytes + parse_file(f.data_->bytes, f.data_->size,
                                                "safetensors " + label, f.tensors_, f.metadata_);
  return f;
}

SafetensorsFile::~SafetensorsFile() = default;
SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  const auto it =
      std::lower_bound(tensors_.begin(), tensors_.end(), name,
                       [](const SafetensorsTensor& t, const std::string& n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

template <class T>
void SafetensorsFile::read(const std::string& name, T* out) const {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  const std::string where = "safetensors '" + path_ + "': tensor " + detail::quoted(name);
  const SafetensorsTensor* t = find(name);
  if (!t) fail_with<SafetensorsError>(where, "no such tensor in the file");
  if (!safetensors_float_dtype(t->dtype))
    fail_with<SafetensorsError>(where,
                                "dtype {} is not a float; read() converts F64, F32, BF16 "
                                "and F16",
                                t->dtype);
  const std::size_t itemsize = find_dtype(t->dtype)->itemsize;
  const std::size_t n = t->elements();
  // In chunks, each chunk's mapped pages given back once converted: a whole model read from
  // the file then holds one chunk of it beside the model, not the file.
  constexpr std::size_t kChunkElements = std::size_t(1) << 20;
  for (std::size_t at = 0; at < n; at += kChunkElements) {
    const std::size_t count = std::min(kChunkElements, n - at);
    const char* src = data_->buffer + t->begin + at * itemsize;
    convert_chunk(t->dtype, src, count, out + at);
    if (data_->mapped) release_pages(src, count * itemsize);
  }
}


template void SafetensorsFile::read<float>(const std::string&, float*) const;
template void SafetensorsFile::read<double>(const std::string&, double*) const;

namespace {

std::uint64_t parse_file(const char* bytes, std::size_t size, const std::string& where,
                         std::vector<SafetensorsTensor>& tensors,
                         std::map<std::string, std::string>& metadata) {
  if (size < 8)
    fail_with<SafetensorsError>(where, "{} bytes, shorter than the 8-byte header length", size);
  std::uint64_t header = 0;
  std::memcpy(&header, bytes, 8);
  if (header > kSafetensorsMaxHeader)
    fail_with<SafetensorsError>(where, "header length {} is over the limit of {} bytes", header,
                                kSafetensorsMaxHeader);
  if (header > size - 8)
    fail_with<SafetensorsError>(where, "header length {} runs past the file's end ({} bytes)",
                                header, size);
  const Json json = parse_json(std::string_view(bytes + 8, header), where + ": header", 3);
  if (!json.is_object()) fail_with<SafetensorsError>(where, "the header is not a JSON object");
  for (const auto& entry : json.items()) {
    if (entry.key() != "__metadata__") {
      tensors.push_back(parse_entry(entry.key(), entry.value(), where));
      continue;
    }
    if (!entry.value().is_object())
      fail_with<SafetensorsError>(where, "__metadata__ is not an object");
    for (const auto& field : entry.value().items()) {
      if (!field.value().is_string())
        fail_with<SafetensorsError>(where, "__metadata__ {} is not a string",
                                    detail::quoted(field.key()));
      metadata[field.key()] = field.value().get<std::string>();
    }
  }
  check_tiling(tensors, size - 8 - header, where);
  return 8 + header;
}

}  // namespace

// ---------------------------------------------------------------------------------------

namespace {

namespace fs = std::filesystem;

// A shard's file name from the index: a plain name inside the folder.
void check_shard_name(const std::string& file, const std::string& where) {
  if (file.empty() || file.find_first_of(std::string("/\\\0", 3)) != std::string::npos ||
      file.find("..") != std::string::npos || file == ".")
    fail_with<SafetensorsError>(where, "shard file name {} is not a plain name inside the folder",
                                detail::quoted(file));
}

// name -> shard file, from model.safetensors.index.json.
std::map<std::string, std::string> read_weight_map(const std::string& path) {
  const std::string where = "safetensors index '" + path + "'";
  std::string text;
  try {
    text = read_text_file(path, "'" + path + "'", kSafetensorsMaxHeader);
  } catch (const std::exception& e) {
    fail_with<SafetensorsError>(where, "{}", e.what());
  }
  const Json json = parse_json(text, where, 16);
  if (!json.is_object()) fail_with<SafetensorsError>(where, "not a JSON object");
  const auto map = json.find("weight_map");
  if (map == json.end() || !map->is_object())
    fail_with<SafetensorsError>(where, "no \"weight_map\" object");
  std::map<std::string, std::string> weight_map;
  for (const auto& entry : map->items()) {
    if (!entry.value().is_string())
      fail_with<SafetensorsError>(where, "weight_map {} is not a file name",
                                  detail::quoted(entry.key()));
    check_shard_name(entry.value().get<std::string>(), where);
    weight_map[entry.key()] = entry.value().get<std::string>();
  }
  return weight_map;
}

}  // namespace

SafetensorsFolder::SafetensorsFolder(const std::string& dir) {
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(single, ec)) {  // transformers prefers the single file too
    files_.emplace_back(single.string());
    for (const SafetensorsTensor& t : files_.back().tensors()) where_[t.name] = 0;
    return;
  }
  if (!fs::exists(index, ec))
    fail_with<SafetensorsError>(
        "SafetensorsFolder", "no model.safetensors or model.safetensors.index.json in '{}'", dir);
  const std::map<std::string, std::string> weight_map = read_weight_map(index.string());
  const std::string where = "safetensors index '" + index.string() + "'";
  std::set<std::string> shards;
  for (const auto& entry : weight_map) shards.insert(entry.second);
  for (const std::string& shard : shards) {
    files_.emplace_back((fs::path(dir) / shard).string());
    for (const SafetensorsTensor& t : files_.back().tensors()) {
      const auto listed = weight_map.find(t.name);
      if (listed == weight_map.end())
        fail_with<SafetensorsError>(where,
                                    "shard {} holds tensor {}, which the index does not "
                                    "list",
                                    detail::quoted(shard), detail::quoted(t.name));
      if (listed->second != shard)
        fail_with<SafetensorsError>(where,
                                    "tensor {} is in shard {} too, but the index puts it "
                                    "in {}",
                                    detail::quoted(t.name), detail::quoted(shard),
                                    detail::quoted(listed->second));
      where_[t.name] = files_.size() - 1;
    }
  }
  for (const auto& [name, shard] : weight_map)
    if (!where_.count(name))
      fail_with<SafetensorsError>(where, "the index puts tensor {} in shard {}, which lacks it",
                                  detail::quoted(name), detail::quoted(shard));
}

std::vector<std::string> SafetensorsFolder::names() const {
  std::vector<std::string> out;
  for (const auto& entry : where_) out.push_back(entry.first);
  return out;
}

const SafetensorsTensor* SafetensorsFolder::find(const std::string& name) const {
  const auto it = where_.find(name);
  return it == where_.end() ? nullptr : files_[it->second].find(name);
}

const std::string& SafetensorsFolder::file_of(const std::string& name) const {
  const auto it = where_.find(name);
  if (it == where_.end())
    fail_with<SafetensorsError>("SafetensorsFolder", "no tensor {} in any shard",
                                detail::quoted(name));
  return files_[it->second].path();
}

template <class T>
void SafetensorsFolder::read(const std::string& name, T* out) const {
  const auto it = where_.find(name);
  if (it == where_.end())
    fail_with<SafetensorsError>("SafetensorsFolder", "no tensor {} in any shard",
                                detail::quoted(name));
  files_[it->second].read(name, out);
}

template void SafetensorsFolder::read<float>(const std::string&, float*) const;
template void SafetensorsFolder::read<double>(const std::string&, double*) const;

// ---------------------------------------------------------------------------------------

namespace {

std::string json_string(const std::string& s, const std::string& where, const char* what) {
  try {
    return Json(s).dump();
  } catch (const Json::exception&) {
    fail_with<SafetensorsError>(where, "{} {} is not valid UTF-8", what, detail::quoted(s));
  }
}

}  // namespace

template <class T>
void save_safetensors(const std::string& path, const std::vector<SafetensorsSource<T>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  const std::string where = "save_safetensors: '" + path + "'";
  const char* dtype = std::is_same_v<T, float> ? "F32" : "F64";
  std::vector<const SafetensorsSource<T>*> sorted;
  for (const SafetensorsSource<T>& t : tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(),
            [](const auto* a, const auto* b) { return a->name < b->name; });
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    for (const auto& [key, value] : metadata)
      header += (header.back() == '{' ? "" : ",") + json_string(key, where, "metadata key") + ":" +
                json_string(value, where, "metadata value");
    header += "}";
  }
  std::vector<std::uint64_t> sizes;
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const SafetensorsSource<T>& t = *sorted[i];
    const std::string twhere = where + ": tensor " + detail::quoted(t.name);
    if (t.name.empty()) fail_with<SafetensorsError>(where, "a tensor has an empty name");
    if (t.name == "__metadata__" || (i > 0 && sorted[i - 1]->name == t.name))
      fail_with<SafetensorsError>(twhere, "the name is reserved or appears twice");
    std::uint64_t bytes = 0;
    if (!byte_count(sizeof(T), t.shape, &bytes))
      fail_with<SafetensorsError>(twhere, "shape {} overflows", shape_text(t.shape));
    if (bytes > 0 && !t.data && !t.fill) fail_with<SafetensorsError>(twhere, "no data");
    std::string shape;
    for (std::size_t d : t.shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    header += (header.back() == '{' ? "" : ",") + json_string(t.name, where, "tensor name") +
              fmt::format(":{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}", dtype,
                          shape, offset, offset + bytes);
    sizes.push_back(bytes);
    offset += bytes;
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');  // so that the data starts 8-aligned
  if (header.size() > kSafetensorsMaxHeader)
    fail_with<SafetensorsError>(where, "the header would take {} bytes, over the limit of {}",
                                header.size(), kSafetensorsMaxHeader);
  detail::write_file_atomically(
      path,
      [&](const detail::WriteBytes& write) {
        const std::uint64_t length = header.size();
        write(std::string_view(reinterpret_cast<const char*>(&length), 8));
        write(header);
        std::vector<T> produced;  // the one tensor a fill has made, freed before the next
        for (std::size_t i = 0; i < sorted.size(); ++i) {
          const T* data = sorted[i]->data;
          if (!data && sorted[i]->fill) {
            produced.assign(sizes[i] / sizeof(T), T(0));
            sorted[i]->fill(produced.data());
            data = produced.data();
          }
          write(std::string_view(reinterpret_cast<const char*>(data), sizes[i]));
          std::vector<T>().swap(produced);
        }
      },
      where);
}

template void save_safetensors<float>(const std::string&,
                                      const std::vector<SafetensorsSource<float>>&,
                                      const std::map<std::string, std::string>&);
template void save_safetensors<double>(const std::string&,
                                       const std::vector<SafetensorsSource<double>>&,
                                       const std::map<std::string, std::string>&);

}  // namespace tapegrad
