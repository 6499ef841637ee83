#include "nn/io/training_state.hpp"

#include <cmath>
#include <cstring>
#include <set>
#include <sstream>

#include "autograd/errors.hpp"

namespace tapegrad {

namespace {

// Longer than any run the trainer accepts, short enough that a count cannot overflow.
constexpr std::int64_t kMaxSteps = std::int64_t{1} << 40;

std::string key(const std::string& name) { return kTrainingPrefix + name; }

template <class... Args>
[[noreturn]] void fail_state(const std::string& label, fmt::format_string<Args...> format,
                             Args&&... args) {
  fail_with<CheckpointError>("checkpoint " + label, format, std::forward<Args>(args)...);
}

template <class V>
NpzEntry scalar(const std::string& name, V value) {
  xt::xarray<V> a = xt::xarray<V>::from_shape(std::vector<std::size_t>{});
  a.data()[0] = value;
  return NpzEntry(key(name), std::move(a));
}

template <class V>
NpzEntry vector_entry(const std::string& name, const std::vector<V>& values) {
  xt::xarray<V> a = xt::xarray<V>::from_shape({values.size()});
  std::copy(values.begin(), values.end(), a.data());
  return NpzEntry(key(name), std::move(a));
}

template <class T, class Source>
xt::xarray<T> to_npz_array(const Source& a) {
  xt::xarray<T> out = xt::xarray<T>::from_shape(a.shape());
  std::copy(a.data(), a.data() + a.size(), out.data());
  return out;
}

// The entries of the training state by name (without the prefix).
using EntryMap = std::map<std::string, const NpzEntry*>;

EntryMap training_entries(const std::vector<NpzEntry>& entries, const std::string& label) {
  EntryMap found;
  const std::string prefix = kTrainingPrefix;
  for (const NpzEntry& e : entries) {
    if (e.name.rfind(prefix, 0) != 0) continue;
    if (!found.emplace(e.name.substr(prefix.size()), &e).second)
      fail_state(label, "entry '{}' appears twice", e.name);
  }
  return found;
}

const NpzEntry& need(const EntryMap& found, const std::string& name, NpzDtype dtype,
                     const Shape& shape, const std::string& label) {
  const auto it = found.find(name);
  if (it == found.end()) fail_state(label, "the training state lacks '{}'", key(name));
  const NpzEntry& e = *it->second;
  if (e.dtype() != dtype)
    fail_state(label, "'{}' is {}, expected {}", e.name, npz_dtype_name(e.dtype()),
               npz_dtype_name(dtype));
  if (e.shape() != shape)
    fail_state(label, "'{}' has shape {}, expected {}", e.name, shape_str(e.shape()),
               shape_str(shape));
  return e;
}

std::int64_t need_count(const EntryMap& found, const std::string& name, std::int64_t lo,
                        std::int64_t hi, const std::string& label) {
  const std::int64_t v = need(found, name, NpzDtype::int64, {}, label).as<std::int64_t>().data()[0];
  if (v < lo || v > hi) fail_state(label, "'{}' is {}, expected {} to {}", key(name), v, lo, hi);
  return v;
}

std::vector<double> need_series(const EntryMap& found, const std::string& name, std::size_t n,
                                const std::string& label) {
  const xt::xarray<double>& a = need(found, name, NpzDtype::float64, {n}, label).as<double>();
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(a.data()[i])) fail_state(label, "'{}'[{}] is {}", key(name), i, a.data()[i]);
  return std::vector<double>(a.data(), a.data() + n);
}

template <class T>
Array<T> need_moment(const EntryMap& found, const std::string& name, const Shape& shape,
                     bool non_negative, const std::string& label) {
  const xt::xarray<T>& a = need(found, name, npz_dtype_of<T>(), shape, label).template as<T>();
  Array<T> out = Array<T>::from_shape(shape);
  for (std::size_t i = 0; i < a.size(); ++i) {
    const T x = a.data()[i];
    if (!std::isfinite(x) || (non_negative && x < T(0)))
      fail_state(label, "'{}' element {} is {}", key(name), i, x);
    out.data()[i] = x;
  }
  return out;
}

// Which names a parameter-keyed family ("m.", "v.", "t.") may use.
void check_families(const EntryMap& found, const std::set<std::string>& parameters,
                    const std::string& label) {
  static const std::set<std::string> fixed = {"format", "step", "total_steps", "loss", "lr",
                                              "precision"};
  for (const auto& [name, entry] : found) {
    if (fixed.count(name)) continue;
    const std::size_t dot = name.find('.');
    const std::string family = dot == std::string::npos ? name : name.substr(0, dot);
    const std::string rest = dot == std::string::npos ? "" : name.substr(dot + 1);
    if ((family == "m" || family == "v" || family == "t") && parameters.count(rest)) continue;
    if ((family == "rng" || family == "setting") && !rest.empty()) continue;
    fail_state(label, "unexpected entry '{}'{}", entry->name,
               family == "m" || family == "v" || family == "t"
                   ? " (names no parameter of the model)" : "");
  }
}

template <class T>
void read_moments(const EntryMap& found, const Module<T>& model, TrainingState<T>& s,
                  const std::string& label) {
  for (const NamedParameter<T>& p : model.named_parameters()) {
    typename AdamW<T>::State st;
    st.step = std::size_t(need_count(found, "t." + p.name, 0, std::int64_t(s.step), label));
    Array<T> m = need_moment<T>(found, "m." + p.name, p.tensor.shape(), false, label);
    Array<T> v = need_moment<T>(found, "v." + p.name, p.tensor.shape(), true, label);
    if (st.step > 0) {
      st.m = std::move(m);
      st.v = std::move(v);
    }
    s.moments.emplace(p.name, std::move(st));
  }
}

template <class T>
void read_extras(const EntryMap& found, TrainingState<T>& s, const std::string& label) {
  for (const auto& item : found) {
    const std::string& name = item.first;
    const NpzEntry* e = item.second;
    if (name.rfind("rng.", 0) == 0) {
      if (e->dtype() != NpzDtype::int64 || e->shape().size() != 1)
        fail_state(label, "'{}' is {} {}, expected int64 words", e->name,
                   npz_dtype_name(e->dtype()), shape_str(e->shape()));
      const xt::xarray<std::int64_t>& a = e->as<std::int64_t>();
      std::vector<std::uint64_t> words(a.size());
      std::memcpy(words.data(), a.data(), a.size() * sizeof(std::uint64_t));
      Generator scratch;
      restore_generator(scratch, words, label + " '" + e->name + "'");
      s.generators.emplace(name.substr(4), std::move(words));
    } else if (name.rfind("setting.", 0) == 0) {
      if (!e->shape().empty())
        fail_state(label, "'{}' has shape {}, expected one value", e->name, shape_str(e->shape()));
      if (e->dtype() == NpzDtype::int64)
        s.integer_settings.emplace(name.substr(8), e->as<std::int64_t>().data()[0]);
      else if (e->dtype() == NpzDtype::float64 && std::isfinite(e->as<double>().data()[0]))
        s.real_settings.emplace(name.substr(8), e->as<double>().data()[0]);
      else
        fail_state(label, "'{}' must be a finite float64 or an int64", e->name);
    }
  }
}

// Required from the format that introduced it; a file written before stands for f32.
MatmulPrecision read_precision(const EntryMap& found, std::int64_t format, const std::string& label) {
  if (format < kPrecisionSince && found.count("precision") == 0) return MatmulPrecision::f32;
  const std::int64_t last = std::int64_t(matmul_precision_names().size()) - 1;
  return static_cast<MatmulPrecision>(need_count(found, "precision", 0, last, label));
}

}  // namespace

std::vector<std::uint64_t> generator_state(Generator& gen) {
  std::ostringstream text;
  text << gen.engine();
  std::istringstream in(text.str());
  std::vector<std::uint64_t> words;
  for (std::uint64_t w = 0; in >> w;) words.push_back(w);
  return words;
}

void restore_generator(Generator& gen, const std::vector<std::uint64_t>& words,
                       const std::string& label) {
  static const std::size_t expected = [] {
    Generator fresh;
    return generator_state(fresh).size();
  }();
  if (words.size() != expected)
    fail_with<CheckpointError>("checkpoint " + label, "a generator state has {} words, expected {}",
                               words.size(), expected);
  // libstdc++ writes the state words and then the position within them; a position past
  // the end would read back unchanged, so it is checked here.
  constexpr std::size_t n = std::mt19937_64::state_size;
  if (words.size() == n + 1 && words.back() > n)
    fail_with<CheckpointError>("checkpoint " + label, "a generator state's position is {}, past "
                               "its {} words", words.back(), n);
  std::ostringstream text;
  for (std::uint64_t w : words) text << w << ' ';
  std::istringstream in(text.str());
  std::mt19937_64 engine;
  in >> engine;
  // Words that are not numbers this library would write read back differently: refuse them
  // rather than run from an engine in an unknown state.
  Generator check;
  check.engine() = engine;
  if (in.fail() || generator_state(check) != words)
    fail_with<CheckpointError>("checkpoint " + label, "the generator state does not read back");
  gen.engine() = engine;
}

template <class T>
std::map<std::string, typename AdamW<T>::State> collect_moments(
    const Module<T>& model, const std::vector<const AdamW<T>*>& optimizers) {
  std::map<std::string, typename AdamW<T>::State> out;
  for (const NamedParameter<T>& p : model.named_parameters())
    for (const AdamW<T>* opt : optimizers)
      for (std::size_t i = 0; i < opt->size(); ++i)
        if (opt->parameter(i).impl() == p.tensor.impl()) {
          typename AdamW<T>::State st = opt->state(i);
          if (st.step == 0) {  // no moments yet: written as zeros of the parameter's shape
            st.m = Array<T>::from_shape(p.tensor.shape());
            st.m.fill(T(0));
            st.v = st.m;
          }
          out.emplace(p.name, std::move(st));
        }
  return out;
}

template <class T>
void restore_moments(const std::map<std::string, typename AdamW<T>::State>& moments,
                     const Module<T>& model, const std::vector<AdamW<T>*>& optimizers,
                     const std::string& label) {
  for (const NamedParameter<T>& p : model.named_parameters())
    for (AdamW<T>* opt : optimizers)
      for (std::size_t i = 0; i < opt->size(); ++i) {
        if (opt->parameter(i).impl() != p.tensor.impl()) continue;
        const auto it = moments.find(p.name);
        if (it == moments.end()) fail_state(label, "no optimiser state for parameter '{}'", p.name);
        try {
          opt->set_state(i, it->second);
        } catch (const ShapeError& e) {
          fail_state(label, "parameter '{}': {}", p.name, e.what());
        }
      }
}

template <class T>
std::vector<NpzEntry> training_state_entries(const TrainingState<T>& s) {
  std::vector<NpzEntry> out = {scalar<std::int64_t>("format", kTrainingFormat),
                               scalar<std::int64_t>("step", std::int64_t(s.step)),
                               scalar<std::int64_t>("total_steps", std::int64_t(s.total_steps)),
                               scalar<std::int64_t>("precision", std::int64_t(s.precision))};
  for (const auto& [name, st] : s.moments) {
    out.push_back(scalar<std::int64_t>("t." + name, std::int64_t(st.step)));
    out.emplace_back(key("m." + name), to_npz_array<T>(st.m));
    out.emplace_back(key("v." + name), to_npz_array<T>(st.v));
  }
  for (const auto& [name, words] : s.generators) {
    std::vector<std::int64_t> bits(words.size());
    std::memcpy(bits.data(), words.data(), words.size() * sizeof(std::uint64_t));
    out.push_back(vector_entry("rng." + name, bits));
  }
  out.push_back(vector_entry("loss", s.losses));
  out.push_back(vector_entry("lr", s.lrs));
  for (const auto& [name, v] : s.real_settings) out.push_back(scalar<double>("setting." + name, v));
  for (const auto& [name, v] : s.integer_settings)
    out.push_back(scalar<std::int64_t>("setting." + name, v));
  return out;
}

bool holds_training_state(const std::vector<NpzEntry>& entries) {
  return find_npz_entry(entries, key("format")) != nullptr;
}

template <class T>
TrainingState<T> training_state_from_entries(const std::vector<NpzEntry>& entries,
                                             const Module<T>& model, const std::string& label) {
  const EntryMap found = training_entries(entries, label);
  const std::int64_t format = need_count(found, "format", 1, kTrainingFormat, label);
  std::set<std::string> parameters;
  for (const NamedParameter<T>& p : model.named_parameters()) parameters.insert(p.name);
  check_families(found, parameters, label);
  TrainingState<T> s;
  s.format = format;
  s.total_steps = std::size_t(need_count(found, "total_steps", 1, kMaxSteps, label));
  s.step = std::size_t(need_count(found, "step", 0, std::int64_t(s.total_steps), label));
  s.losses = need_series(found, "loss", s.step, label);
  s.lrs = need_series(found, "lr", s.step, label);
  s.precision = read_precision(found, format, label);
  read_moments(found, model, s, label);
  read_extras(found, s, label);
  return s;
}

#define TAPEGRAD_INSTANTIATE(T)                                                               \
  template std::map<std::string, typename AdamW<T>::State> collect_moments(                   \
      const Module<T>&, const std::vector<const AdamW<T>*>&);                                 \
  template void restore_moments(const std::map<std::string, typename AdamW<T>::State>&,       \
                                const Module<T>&, const std::vector<AdamW<T>*>&,              \
                                const std::string&);                                          \
  template std::vector<NpzEntry> training_state_entries(const TrainingState<T>&);             \
  template TrainingState<T> training_state_from_entries(const std::vector<NpzEntry>&,         \
                                                        const Module<T>&, const std::string&);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad
