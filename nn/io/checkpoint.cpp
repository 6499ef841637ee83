#include "nn/io/checkpoint.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <type_traits>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "autograd/errors.hpp"  // fail_with, shape_str
#include "autograd/tape.hpp"
#include "nn/io/weight_loader.hpp"
#include "nn/parameter_plan.hpp"

namespace tapegrad {

namespace {

bool is_config(const std::string& name) {
  return name.rfind(kConfigPrefix, 0) == 0 || name.rfind(kTrainingPrefix, 0) == 0;
}

// Messages read "checkpoint <file>: what is wrong", built by fail_with as every error is.
std::string checkpoint_op(const std::string& label) { return "checkpoint " + label; }

template <class V>
NpzEntry scalar_entry(const std::string& field, V value) {
  xt::xarray<V> a = xt::xarray<V>::from_shape(std::vector<std::size_t>{});
  a.data()[0] = value;
  return NpzEntry(kConfigPrefix + field, std::move(a));
}

template <class V>
V read_scalar(const std::vector<NpzEntry>& entries, const std::string& field,
              const std::string& label) {
  const std::string name = kConfigPrefix + field;
  const NpzEntry* e = find_npz_entry(entries, name);
  if (!e)
    fail_with<CheckpointError>(checkpoint_op(label),
                               "missing config entry '{}' (not a Transformer "
                               "checkpoint, or written by another version)",
                               name);
  if (e->dtype() != npz_dtype_of<V>())
    fail_with<CheckpointError>(checkpoint_op(label), "config entry '{}' is {}, expected {}", name,
                               npz_dtype_name(e->dtype()), npz_dtype_name(npz_dtype_of<V>()));
  const xt::xarray<V>& a = e->as<V>();
  if (a.size() != 1)
    fail_with<CheckpointError>(checkpoint_op(label),
                               "config entry '{}' has shape {}, expected one value", name,
                               shape_str(e->shape()));
  return a.data()[0];
}

// A model of at most this many tensors is cheap to build whatever the file holds.
constexpr long double kAlwaysBuildableTensors = 1024;

}  // namespace

// Named, not anonymous: the library compiles in unity batches.
namespace checkpoint_parts {

// An npz's parameter entries as a source of weights (nn/io/weight_loader.hpp): float32 and
// float64 read as they are, float32 widened into a double model without loss (a trained
// model can be gradient-checked in double); float64 into a float model would round, so it
// is refused. Its `__config__.` and `__train__.` entries are not weights.
class NpzWeights final : public WeightSource {
 public:
  NpzWeights(const std::vector<NpzEntry>& entries, std::string label) : label_(std::move(label)) {
    for (const NpzEntry& e : entries) {
      if (is_config(e.name)) continue;
      if (!by_name_.emplace(e.name, Held{{e.shape(), npz_dtype_name(e.dtype())}, &e}).second)
        fail_with<CheckpointError>(op(), "entry '{}' appears twice", e.name);
      names_.push_back(e.name);
    }
  }
  std::vector<std::string> names() const override { return names_; }
  const HeldTensor* find(const std::string& name) const override {
    const auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : &it->second.tensor;
  }
  bool converts(const std::string& dtype, bool to_double) const override {
    return dtype == npz_dtype_name(NpzDtype::float32) ||
           (to_double && dtype == npz_dtype_name(NpzDtype::float64));
  }
  void read(const std::string& name, float* out) const override { copy(name, out); }
  void read(const std::string& name, double* out) const override { copy(name, out); }

  std::string op() const override { return checkpoint_op(label_); }
  std::string unexpected(const std::string& name) const override {
    return fmt::format("entry '{}' is not a parameter of the model", name);
  }
  std::string missing(const std::string& name, const std::vector<std::size_t>& shape) const override {
    return fmt::format("parameter '{}' {} is missing", name, shape_str(shape));
  }
  std::string wrong_shape(const std::string& name, const std::vector<std::size_t>& held,
                          const std::vector<std::size_t>& wanted) const override {
    return fmt::format("parameter '{}' has shape {} in the file but {} in the model", name,
                       shape_str(held), shape_str(wanted));
  }
  std::string wrong_dtype(const std::string& name, const std::string& dtype,
                          bool to_double) const override {
    return fmt::format("parameter '{}' is {} in the file but the model is {}", name, dtype,
                       npz_dtype_name(to_double ? NpzDtype::float64 : NpzDtype::float32));
  }
  std::string too_few_scalars(long double wanted, long double held) const override {
    return fmt::format("the config describes {:.0f} parameters but the file holds {:.0f}",
                       double(wanted), double(held));
  }
  std::string too_few_tensors(long double wanted, long double held) const override {
    return fmt::format("the config describes {:.0f} parameter tensors but the file holds {:.0f}",
                       double(wanted), double(held));
  }
  std::string nonfinite(const std::string&, const std::string& why) const override {
    return "parameter " + why;
  }

 private:
  struct Held {
    HeldTensor tensor;
    const NpzEntry* entry;
  };
  template <class T>
  void copy(const std::string& name, T* out) const {
    // row-major and contiguous: a memcpy when the types agree
    std::visit([&](const auto& a) { std::copy(a.data(), a.data() + a.size(), out); },
               by_name_.at(name).entry->array);
  }
  std::string label_;
  std::vector<std::string> names_;  // in the file's order
  std::map<std::string, Held> by_name_;
};

// Checks every name, shape and dtype of the source against `module`, then copies the
// values (nothing is written unless everything fits).
template <class T>
void assign_parameters(const NpzWeights& source, Module<T>& module) {
  std::vector<WantedTensor> wanted;
  std::vector<LoadTarget<T>> targets;
  NoGradGuard guard;
  for (const NamedParameter<T>& p : module.named_parameters()) {
    wanted.push_back({p.name, p.tensor.shape()});
    Tensor<T> t = p.tensor;
    targets.push_back({p.name, p.tensor.shape(), t.value().data(), {}});
  }
  check_names(source, wanted, std::is_same_v<T, double>);
  read_weights(source, targets, /*check_finite=*/false);  // the programs check, with their way out
}

}  // namespace checkpoint_parts

namespace {

void check_same_architecture(const TransformerConfig& file, const TransformerConfig& model,
                             const std::string& label) {
  std::string differences;
  for (const FieldInfo& f : config_fields()) {
    if (f.role != FieldRole::architecture) continue;
    const std::string a = field_to_string(file, f.name), b = field_to_string(model, f.name);
    if (a != b) differences += fmt::format("{}{}={} in the file, {}={} in this model",
                                           differences.empty() ? "" : "; ", f.name, a, f.name, b);
  }
  if (!differences.empty())
    fail_with<CheckpointError>(checkpoint_op(label), "the file's model differs from this model: {}",
                               differences);
}

bool is_known_config_key(const std::string& key) {
  if (key == "format") return true;
  for (const FieldInfo& f : config_fields())
    if (key == f.name) return true;
  for (const char* extra : kConfigExtras)
    if (key == extra) return true;
  return false;
}

// A `__config__.` entry this build does not know is a field of a newer build (or damage):
// reading the file without it would build another model than the one that was saved.
void check_config_names(const std::vector<NpzEntry>& entries, const std::string& label) {
  const std::string prefix = kConfigPrefix;
  for (const NpzEntry& e : entries)
    if (e.name.rfind(prefix, 0) == 0 && !is_known_config_key(e.name.substr(prefix.size())))
      fail_with<CheckpointError>(checkpoint_op(label),
                                 "config entry '{}' is not a field of this build's model "
                                 "(written by a newer version?)",
                                 e.name);
}

}  // namespace

std::vector<NpzEntry> config_entries(const TransformerConfig& c) {
  std::vector<NpzEntry> entries = {scalar_entry<std::int64_t>("format", kCheckpointFormat)};
  for (const FieldInfo& f : config_fields()) {
    if (f.role == FieldRole::execution) continue;  // how a run computes: not the model's
    if (field_is_real(f.name)) entries.push_back(scalar_entry<double>(f.name, field_to_double(c, f.name)));
    else entries.push_back(scalar_entry<std::int64_t>(f.name, field_to_int64(c, f.name)));
  }
  return entries;
}

// The rule of nn/io/checkpoint.hpp: a field the file's format has must be there; a field it
// predates keeps its `old` value unless the file holds it anyway.
TransformerConfig config_from_entries(const std::vector<NpzEntry>& entries, const std::string& label) {
  const std::int64_t format = read_scalar<std::int64_t>(entries, "format", label);
  if (format < 1)
    fail_with<CheckpointError>(checkpoint_op(label), "format {} is not a checkpoint format", format);
  if (format > kCheckpointFormat)
    fail_with<CheckpointError>(checkpoint_op(label),
                               "format {} is newer than this build, which reads formats 1 to {}",
                               format, kCheckpointFormat);
  check_config_names(entries, label);
  TransformerConfig c = config_before_fields();
  for (const FieldInfo& f : config_fields()) {
    if (f.role == FieldRole::execution) continue;  // never stored: the default
    const std::string name = kConfigPrefix + std::string(f.name);
    if (!find_npz_entry(entries, name)) {
      if (f.since > format) continue;
      fail_with<CheckpointError>(checkpoint_op(label),
                                 "missing config entry '{}', which every file of format {} "
                                 "holds (the field came with format {})",
                                 name, format, f.since);
    }
    try {
      if (field_is_real(f.name)) set_field_from_double(c, f.name, read_scalar<double>(entries, f.name, label));
      else set_field_from_int64(c, f.name, read_scalar<std::int64_t>(entries, f.name, label));
    } catch (const ShapeError& e) {
      fail_with<CheckpointError>(checkpoint_op(label), "config entry '{}': {}", name, e.what());
    }
  }
  try {
    c.validate();
  } catch (const ShapeError& e) {
    fail_with<CheckpointError>(checkpoint_op(label), "invalid config: {}", e.what());
  }
  return c;
}

template <class T>
void save_parameters(const std::string& path, const Module<T>& module,
                     const std::vector<NpzEntry>& extra) {
  std::vector<NpzEntry> entries;
  entries.reserve(module.named_parameters().size() + extra.size());
  for (const NamedParameter<T>& p : module.named_parameters())
    entries.emplace_back(p.name, xt::xarray<T>(p.tensor.value()));
  for (const NpzEntry& e : extra) entries.push_back(e);
  save_npz(path, entries);
}

template <class T>
void load_parameters(const std::string& path, Module<T>& module) {
  checkpoint_parts::assign_parameters(checkpoint_parts::NpzWeights(load_npz(path), path), module);
}

template <class T>
void save_checkpoint(const std::string& path, const Transformer<T>& model) {
  save_parameters(path, model, config_entries(model.config()));
}

TransformerConfig read_checkpoint_config(const std::string& path) {
  return config_from_entries(load_npz(path), path);
}

template <class T>
Transformer<T> load_checkpoint(const std::string& path) {
  return checkpoint_model<T>(load_npz(path), path);
}

template <class T>
Transformer<T> checkpoint_model(const std::vector<NpzEntry>& entries, const std::string& path) {
  const TransformerConfig config = config_from_entries(entries, path);
  const checkpoint_parts::NpzWeights source(entries, path);
  // the scalars and tensors the config describes, from its parameter plan (long double: a
  // hostile config cannot overflow them), then its names and shapes, before anything is built
  const ParameterPlan plan(config);
  check_counts(source, {plan.scalars(), plan.tensors(), 0, kAlwaysBuildableTensors});
  std::vector<WantedTensor> wanted;
  plan.for_each([&](const std::string& name, const PlannedParameter& p) {
    wanted.push_back({name, p.shape});
  });
  check_names(source, wanted, std::is_same_v<T, double>);
  Transformer<T> model = Transformer<T>::to_be_loaded(config);
  checkpoint_parts::assign_parameters(source, model);
  return model;
}

template <class T>
void load_checkpoint(const std::string& path, Transformer<T>& model) {
  const std::vector<NpzEntry> entries = load_npz(path);
  check_same_architecture(config_from_entries(entries, path), model.config(), path);
  checkpoint_parts::assign_parameters(checkpoint_parts::NpzWeights(entries, path), model);
}

#define TAPEGRAD_INSTANTIATE(T)                                                          \
  template void save_parameters(const std::string&, const Module<T>&,                    \
                                const std::vector<NpzEntry>&);                            \
  template void load_parameters(const std::string&, Module<T>&);                          \
  template void save_checkpoint(const std::string&, const Transformer<T>&);                   \
  template Transformer<T> load_checkpoint(const std::string&);                                \
  template Transformer<T> checkpoint_model(const std::vector<NpzEntry>&, const std::string&); \
  template void load_checkpoint(const std::string&, Transformer<T>&);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad
