#include "nn/io/finite_weights.hpp"

#include <cmath>
#include <type_traits>
#include <variant>

#include <fmt/format.h>

#include "autograd/shape.hpp"     // shape_str
#include "nn/io/checkpoint.hpp"  // kConfigPrefix, kTrainingPrefix

namespace tapegrad {

namespace {

std::string refusal(const std::string& why, const std::string& way_out) {
  return why.empty() ? why : fmt::format("parameter {} ({} loads it anyway)", why, way_out);
}

bool is_weight(const std::string& entry_name) {
  return entry_name.rfind(kConfigPrefix, 0) != 0 && entry_name.rfind(kTrainingPrefix, 0) != 0;
}

}  // namespace

template <class T>
std::string nonfinite_value(const std::string& name, const std::string& shape, const T* values,
                            std::size_t count) {
  for (std::size_t i = 0; i < count; ++i)
    if (!std::isfinite(values[i]))
      return fmt::format("'{}' {} holds {} at element {}", name, shape, values[i], i);
  return "";
}

template <class T>
std::string nonfinite_parameter(const Module<T>& model, const std::string& way_out) {
  for (const NamedParameter<T>& p : model.named_parameters()) {
    const std::string why = nonfinite_value(p.name, p.tensor.shape_string(),
                                            p.tensor.value().data(), p.tensor.size());
    if (!why.empty()) return refusal(why, way_out);
  }
  return "";
}

std::string nonfinite_parameter(const std::vector<NpzEntry>& checkpoint, const std::string& way_out) {
  for (const NpzEntry& e : checkpoint) {
    if (!is_weight(e.name)) continue;
    const std::string why = std::visit([&](const auto& a) -> std::string {
      using V = typename std::decay_t<decltype(a)>::value_type;
      if constexpr (std::is_floating_point_v<V>)
        return nonfinite_value(e.name, shape_str(e.shape()), a.data(), a.size());
      else
        return "";
    }, e.array);
    if (!why.empty()) return refusal(why, way_out);
  }
  return "";
}

#define TAPEGRAD_INSTANTIATE(T)                                                          \
  template std::string nonfinite_value(const std::string&, const std::string&, const T*,    \
                                       std::size_t);                                      \
  template std::string nonfinite_parameter(const Module<T>&, const std::string&);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad
