#include "nn/checkpoint.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "autograd/tape.hpp"

namespace tapegrad {

namespace {

constexpr std::int64_t kFormat = 1;
// No config field may exceed this (it also keeps the size arithmetic below exact):
// a damaged or hostile config must not make the loader build a giant model.
constexpr std::int64_t kMaxField = std::int64_t{1} << 24;
// A model of at most this many parameters is cheap enough to build just to report what a
// file lacks.
constexpr long double kAlwaysBuildable = 1 << 22;

bool is_config(const std::string& name) { return name.rfind(kConfigPrefix, 0) == 0; }

[[noreturn]] void fail_checkpoint(const std::string& label, const std::string& what) {
  throw CheckpointError(fmt::format("checkpoint {}: {}", label, what));
}

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
  if (!e) fail_checkpoint(label, fmt::format("missing config entry '{}' (not a TinyGPT "
                                             "checkpoint, or written by another version)", name));
  if (e->dtype() != npz_dtype_of<V>())
    fail_checkpoint(label, fmt::format("config entry '{}' is {}, expected {}", name,
                                       npz_dtype_name(e->dtype()), npz_dtype_name(npz_dtype_of<V>())));
  const xt::xarray<V>& a = e->as<V>();
  if (a.size() != 1)
    fail_checkpoint(label, fmt::format("config entry '{}' has shape {}, expected one value",
                                       name, shape_str(e->shape())));
  return a.data()[0];
}

std::size_t read_size(const std::vector<NpzEntry>& entries, const std::string& field,
                      const std::string& label) {
  const std::int64_t v = read_scalar<std::int64_t>(entries, field, label);
  if (v < 1 || v > kMaxField)
    fail_checkpoint(label, fmt::format("config entry '{}{}' = {} is outside [1, {}]",
                                       kConfigPrefix, field, v, kMaxField));
  return static_cast<std::size_t>(v);
}

// The number of scalars a TinyGPT of config c has, in long double so that a hostile
// config cannot overflow it (see TinyGPT's parameter list in nn/tinygpt.hpp).
long double expected_parameters(const TinyGPTConfig& c) {
  const long double V = c.vocab, C = c.context, D = c.d_model, L = c.layers;
  const long double H = static_cast<long double>(c.mlp_ratio) * D;
  const long double norm = c.norm == NormKind::layer_norm ? 2 * D : D;
  const long double block = norm + 4 * D * D + norm + (D * H + H) + (H * D + D);
  return V * D + C * D + L * block + norm + D * V;
}

// The number of parameter tensors of a TinyGPT of config c (the list in nn/tinygpt.hpp).
long double expected_tensors(const TinyGPTConfig& c) {
  const long double norm = c.norm == NormKind::layer_norm ? 2 : 1;
  return 2 + static_cast<long double>(c.layers) * (2 * norm + 8) + norm + 1;
}
// A model of at most this many tensors is cheap to build whatever the file holds.
constexpr long double kAlwaysBuildableTensors = 1024;

// Checks every name, shape and dtype of `entries` against `module`, then copies the
// values (nothing is written unless everything fits).
template <class T>
void assign_parameters(const std::vector<NpzEntry>& entries, Module<T>& module,
                       const std::string& label) {
  std::map<std::string, const NpzEntry*> by_name;
  for (const NpzEntry& e : entries) {
    if (is_config(e.name)) continue;
    if (!by_name.emplace(e.name, &e).second)
      fail_checkpoint(label, fmt::format("entry '{}' appears twice", e.name));
    if (!module.has_parameter(e.name))
      fail_checkpoint(label, fmt::format("entry '{}' is not a parameter of the model", e.name));
  }
  for (const NamedParameter<T>& p : module.named_parameters()) {
    const auto it = by_name.find(p.name);
    if (it == by_name.end())
      fail_checkpoint(label, fmt::format("parameter '{}' {} is missing", p.name,
                                         p.tensor.shape_string()));
    const NpzEntry& e = *it->second;
    if (e.dtype() != npz_dtype_of<T>())
      fail_checkpoint(label, fmt::format("parameter '{}' is {} in the file but the model is {}",
                                         p.name, npz_dtype_name(e.dtype()),
                                         npz_dtype_name(npz_dtype_of<T>())));
    if (e.shape() != p.tensor.shape())
      fail_checkpoint(label, fmt::format("parameter '{}' has shape {} in the file but {} in "
                                         "the model", p.name, shape_str(e.shape()),
                                         p.tensor.shape_string()));
  }
  NoGradGuard guard;
  for (const NamedParameter<T>& p : module.named_parameters()) {
    const xt::xarray<T>& src = by_name.at(p.name)->template as<T>();
    Tensor<T> t = p.tensor;
    std::memcpy(t.value().data(), src.data(), src.size() * sizeof(T));
  }
}

void check_same_architecture(const TinyGPTConfig& file, const TinyGPTConfig& model,
                             const std::string& label) {
  TinyGPTConfig a = file, b = model;
  a.seed = b.seed = 0;
  a.attention_init = b.attention_init = AttentionInit::gpt2;
  if (a == b) return;
  auto describe = [](const TinyGPTConfig& c) {
    return fmt::format("vocab={} context={} d_model={} heads={} layers={} mlp_ratio={} norm={} "
                       "attention_scale={}", c.vocab, c.context, c.d_model, c.heads, c.layers,
                       c.mlp_ratio, c.norm == NormKind::layer_norm ? "layer_norm" : "rms_norm",
                       c.attention_scale ? fmt::format("{}", *c.attention_scale) : "default");
  };
  fail_checkpoint(label, fmt::format("the file's model ({}) differs from this model ({})",
                                     describe(file), describe(model)));
}

}  // namespace

std::vector<NpzEntry> config_entries(const TinyGPTConfig& c) {
  auto i64 = [](std::size_t v) { return static_cast<std::int64_t>(v); };
  std::int64_t seed;
  static_assert(sizeof seed == sizeof c.seed);
  std::memcpy(&seed, &c.seed, sizeof seed);
  return {
      scalar_entry<std::int64_t>("format", kFormat),
      scalar_entry<std::int64_t>("vocab", i64(c.vocab)),
      scalar_entry<std::int64_t>("context", i64(c.context)),
      scalar_entry<std::int64_t>("d_model", i64(c.d_model)),
      scalar_entry<std::int64_t>("heads", i64(c.heads)),
      scalar_entry<std::int64_t>("layers", i64(c.layers)),
      scalar_entry<std::int64_t>("mlp_ratio", i64(c.mlp_ratio)),
      scalar_entry<std::int64_t>("norm", c.norm == NormKind::layer_norm ? 0 : 1),
      scalar_entry<std::int64_t>("attention_init", c.attention_init == AttentionInit::gpt2 ? 0 : 1),
      scalar_entry<std::int64_t>("seed", seed),
      scalar_entry<double>("attention_scale", c.attention_scale
                                                  ? *c.attention_scale
                                                  : std::numeric_limits<double>::quiet_NaN()),
  };
}

TinyGPTConfig config_from_entries(const std::vector<NpzEntry>& entries, const std::string& label) {
  const std::int64_t format = read_scalar<std::int64_t>(entries, "format", label);
  if (format != kFormat)
    fail_checkpoint(label, fmt::format("format {} is not the supported format {}", format, kFormat));
  TinyGPTConfig c;
  c.vocab = read_size(entries, "vocab", label);
  c.context = read_size(entries, "context", label);
  c.d_model = read_size(entries, "d_model", label);
  c.heads = read_size(entries, "heads", label);
  c.layers = read_size(entries, "layers", label);
  c.mlp_ratio = read_size(entries, "mlp_ratio", label);
  const std::int64_t norm = read_scalar<std::int64_t>(entries, "norm", label);
  if (norm != 0 && norm != 1)
    fail_checkpoint(label, fmt::format("config entry '{}norm' = {} is neither 0 (layer_norm) nor "
                                       "1 (rms_norm)", kConfigPrefix, norm));
  c.norm = norm == 0 ? NormKind::layer_norm : NormKind::rms_norm;
  const std::int64_t init = read_scalar<std::int64_t>(entries, "attention_init", label);
  if (init != 0 && init != 1)
    fail_checkpoint(label, fmt::format("config entry '{}attention_init' = {} is neither 0 (gpt2) "
                                       "nor 1 (variance_preserving)", kConfigPrefix, init));
  c.attention_init = init == 0 ? AttentionInit::gpt2 : AttentionInit::variance_preserving;
  const std::int64_t seed = read_scalar<std::int64_t>(entries, "seed", label);
  std::memcpy(&c.seed, &seed, sizeof seed);
  const double scale = read_scalar<double>(entries, "attention_scale", label);
  if (!std::isnan(scale)) c.attention_scale = scale;
  try {
    c.validate();
  } catch (const ShapeError& e) {
    fail_checkpoint(label, fmt::format("invalid config: {}", e.what()));
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
  assign_parameters(load_npz(path), module, path);
}

template <class T>
void save_checkpoint(const std::string& path, const TinyGPT<T>& model) {
  save_parameters(path, model, config_entries(model.config()));
}

TinyGPTConfig read_checkpoint_config(const std::string& path) {
  return config_from_entries(load_npz(path), path);
}

template <class T>
TinyGPT<T> load_checkpoint(const std::string& path) {
  const std::vector<NpzEntry> entries = load_npz(path);
  const TinyGPTConfig config = config_from_entries(entries, path);
  // A damaged or hostile config must not make us allocate a giant model: build it only
  // if it is no bigger than what the file holds (which is already in memory) or small
  // anyway; assign_parameters then names exactly what is missing or wrong.
  long double held = 0, held_tensors = 0;
  for (const NpzEntry& e : entries)
    if (!is_config(e.name)) {
      long double n = 1;
      for (std::size_t d : e.shape()) n *= d;
      held += n;
      held_tensors += 1;
    }
  const long double expected = expected_parameters(config);
  if (expected > held && expected > kAlwaysBuildable)
    fail_checkpoint(path, fmt::format("the config describes {:.0f} parameters but the file "
                                      "holds {:.0f}", static_cast<double>(expected),
                                      static_cast<double>(held)));
  // Tiny layers can keep the scalar count small while the tensor count explodes (16385
  // layers of d_model 4 took minutes to build: found by fuzz/fuzz_checkpoint).
  const long double tensors = expected_tensors(config);
  if (tensors > held_tensors && tensors > kAlwaysBuildableTensors)
    fail_checkpoint(path, fmt::format("the config describes {:.0f} parameter tensors but the "
                                      "file holds {:.0f}", static_cast<double>(tensors),
                                      static_cast<double>(held_tensors)));
  TinyGPT<T> model(config);
  assign_parameters(entries, model, path);
  return model;
}

template <class T>
void load_checkpoint(const std::string& path, TinyGPT<T>& model) {
  const std::vector<NpzEntry> entries = load_npz(path);
  check_same_architecture(config_from_entries(entries, path), model.config(), path);
  assign_parameters(entries, model, path);
}

#define TAPEGRAD_INSTANTIATE(T)                                                          \
  template void save_parameters(const std::string&, const Module<T>&,                    \
                                const std::vector<NpzEntry>&);                            \
  template void load_parameters(const std::string&, Module<T>&);                          \
  template void save_checkpoint(const std::string&, const TinyGPT<T>&);                   \
  template TinyGPT<T> load_checkpoint(const std::string&);                                \
  template void load_checkpoint(const std::string&, TinyGPT<T>&);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad
