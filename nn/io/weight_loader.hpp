#pragma once
// The one loading core of both weight formats: a source (an npz checkpoint's entries, or a
// Hugging Face folder's safetensors file or shards) and the tensors wanted of it (the
// parameters by name for an npz, the described file tensors of hf_tensor_map.hpp for a
// folder). The guards are written here once, in the order a load runs them:
//   1. check_counts: the scalars and tensors the configuration describes against what the
//      source holds, before anything is built (a hostile config of millions of layers);
//   2. check_names: every name the source holds wanted (or ignored), every wanted one held,
//      its shape, and a dtype the source converts into the model's;
//   3. read_weights: the values into the model, checked for NaN and Inf where asked.
// Each refusal is a CheckpointError in its source's own words (the two formats' messages
// predate this core, and tests and users know them).
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace tapegrad {

// One tensor a source holds: its shape, and its dtype as the source spells it ("float32",
// "BF16").
struct HeldTensor {
  std::vector<std::size_t> shape;
  std::string dtype;
  long double elements() const;
};

// Where weights come from, and how a refusal of them is worded.
class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // The weights' names (not an npz's config entries), and one of them, or null.
  virtual std::vector<std::string> names() const = 0;
  virtual const HeldTensor* find(const std::string& name) const = 0;
  // A name held that is no weight of the model and is passed over (a folder's mask buffers).
  virtual bool ignored(const std::string& name) const { (void)name; return false; }
  // Whether a tensor of `dtype` reads into a model of float (to_double false) or double.
  virtual bool converts(const std::string& dtype, bool to_double) const = 0;
  virtual void read(const std::string& name, float* out) const = 0;
  virtual void read(const std::string& name, double* out) const = 0;

  // The refusals' op ("checkpoint <path>") and texts.
  virtual std::string op() const = 0;
  virtual std::string unexpected(const std::string& name) const = 0;
  virtual std::string missing(const std::string& name, const std::vector<std::size_t>& shape) const = 0;
  virtual std::string wrong_shape(const std::string& name, const std::vector<std::size_t>& held,
                                  const std::vector<std::size_t>& wanted) const = 0;
  virtual std::string wrong_dtype(const std::string& name, const std::string& dtype,
                                  bool to_double) const = 0;
  virtual std::string too_few_scalars(long double wanted, long double held) const = 0;
  virtual std::string too_few_tensors(long double wanted, long double held) const = 0;
  // `why` is nonfinite_value's "'name' (2, 3) holds nan at element 4".
  virtual std::string nonfinite(const std::string& name, const std::string& why) const = 0;
};

// What the configuration describes, for check_counts.
struct WantedCounts {
  long double scalars = 0, tensors = 0;
  // How many tensors fewer than wanted a source may hold and still reach check_names, which
  // names what it lacks: a folder is refused one whole layer short (so `smallest layer - 1`),
  // an npz one tensor short, above `tensors_always_checked`.
  long double tolerated_shortfall = 0;
  long double tensors_always_checked = 0;
};

// A model of at most this many parameters is cheap enough to build just to report what a
// source lacks: the scalar guard refuses only above it.
inline constexpr long double kScalarsAlwaysChecked = 1 << 22;

// CheckpointError when the source holds fewer scalars than wanted (above
// kScalarsAlwaysChecked), or fewer tensors than the counts tolerate.
void check_counts(const WeightSource& source, const WantedCounts& wanted);

// One tensor wanted of a source: its name and shape.
struct WantedTensor {
  std::string name;
  std::vector<std::size_t> shape;
};

// Every name the source holds is wanted or ignored; every wanted one is held, shaped as
// wanted, in a dtype that converts into T (`to_double`: T is double). Nothing is read.
void check_names(const WeightSource& source, const std::vector<WantedTensor>& wanted, bool to_double);

// One tensor to read, checked by check_names: into the model's storage as it is (`direct`),
// or through `load` from the values in the source's layout.
template <class T>
struct LoadTarget {
  std::string name;
  std::vector<std::size_t> shape;
  T* direct = nullptr;
  std::function<void(const T*)> load;
};

// The targets' values read from the source, in order, one converted tensor held at a time;
// with `check_finite`, a NaN or Inf is refused naming the tensor and the element.
template <class T>
void read_weights(const WeightSource& source, const std::vector<LoadTarget<T>>& targets,
                  bool check_finite);

extern template void read_weights(const WeightSource&, const std::vector<LoadTarget<float>>&, bool);
extern template void read_weights(const WeightSource&, const std::vector<LoadTarget<double>>&, bool);

}  // namespace tapegrad
