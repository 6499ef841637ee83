#pragma once
// safetensors, the Hugging Face weight format: a little-endian u64 N, N bytes of UTF-8 JSON
// (name -> {"dtype", "shape", "data_offsets": [begin, end)} relative to the buffer, plus an
// optional "__metadata__" of strings), then the raw little-endian row-major buffer.
//
// Reading maps the file (mmap) and checks the whole header before any tensor is read, so a
// tensor is converted straight from the mapping into its destination: reading a file holds
// no copy of it. The bytes are treated as hostile (fuzz/fuzz_safetensors.cpp): every
// inconsistency is a SafetensorsError naming the file and, where there is one, the tensor.
// Writing is atomic (a temporary file renamed over the destination) and streams each
// tensor from its source.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tapegrad {

class SafetensorsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The header's limit, as the reference reader's.
inline constexpr std::uint64_t kSafetensorsMaxHeader = 100'000'000;

struct SafetensorsTensor {
  std::string name;
  std::string dtype;  // as the header spells it: "F32", "BF16", "I64", ...
  std::vector<std::size_t> shape;
  std::uint64_t begin = 0, end = 0;  // byte range in the data buffer
  std::size_t elements() const;
};

// Whether read() converts this dtype: F64, F32, BF16, F16.
bool safetensors_float_dtype(std::string_view dtype);

// One .safetensors file, mapped read-only and checked on open.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);
  // The same checks over bytes in memory (the fuzz target; `label` names them in errors).
  static SafetensorsFile from_bytes(std::string bytes, const std::string& label);
  ~SafetensorsFile();
  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;

  const std::string& path() const { return path_; }
  // Sorted by name.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* find(const std::string& name) const;  // null when absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // The tensor's elements converted to T (float or double) into out[0, elements()):
  // F64 -> float rounds to nearest, BF16 and F16 widen exactly. SafetensorsError naming
  // the file and the tensor for an unknown name or a dtype that is not a float.
  template <class T>
  void read(const std::string& name, T* out) const;

 private:
  SafetensorsFile() = default;
  struct Mapping;
  std::string path_;
  std::unique_ptr<Mapping> data_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A model folder's weights: `model.safetensors`, or the shards that
// `model.safetensors.index.json` names ({"metadata": {...}, "weight_map": {name: file}});
// every shard is opened and checked, and a name in two shards, a shard the index does not
// list a tensor of, or an index entry whose shard lacks it is an error.
class SafetensorsFolder {
 public:
  explicit SafetensorsFolder(const std::string& dir);
  // Sorted by name, over all the shards.
  std::vector<std::string> names() const;
  const SafetensorsTensor* find(const std::string& name) const;
  template <class T>
  void read(const std::string& name, T* out) const;
  const std::string& file_of(const std::string& name) const;  // the shard's path

 private:
  std::vector<SafetensorsFile> files_;
  std::map<std::string, std::size_t> where_;  // name -> index into files_
};

// A tensor to write: its name, shape and contiguous row-major values, either held (data) or
// produced when the writer reaches the tensor (fill writes its elements into out[0, n)):
// a file of converted tensors (transposed, split, permuted) then needs one converted
// tensor at a time, not a converted copy of them all.
template <class T>
struct SafetensorsSource {
  SafetensorsSource(std::string n, std::vector<std::size_t> s, const T* values)
      : name(std::move(n)), shape(std::move(s)), data(values) {}
  SafetensorsSource(std::string n, std::vector<std::size_t> s, std::function<void(T* out)> f)
      : name(std::move(n)), shape(std::move(s)), fill(std::move(f)) {}
  std::string name;
  std::vector<std::size_t> shape;
  const T* data = nullptr;
  std::function<void(T* out)> fill;
};

// Writes F32 (float) or F64 (double) tensors: names sorted, the header padded with spaces
// to a multiple of 8, `__metadata__` = metadata (by default {"format": "pt"}, what
// transformers expects). SafetensorsError for a duplicate or empty name; std::system_error
// (errno) when the file cannot be written.
template <class T>
void save_safetensors(const std::string& path, const std::vector<SafetensorsSource<T>>& tensors,
                      const std::map<std::string, std::string>& metadata = {{"format", "pt"}});

}  // namespace tapegrad
