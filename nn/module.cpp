#include "nn/module.hpp"

namespace tapegrad {

namespace {

// A parameter name is one path component; a child's name may be a path ("blocks.0").
void check_name(const char* op, const std::string& name, bool path_allowed) {
  const bool bad = name.empty() || name.front() == '.' || name.back() == '.' ||
                   name.find("..") != std::string::npos ||
                   (!path_allowed && name.find('.') != std::string::npos);
  if (bad)
    fail(op, "name '{}' must be non-empty{}", name,
         path_allowed ? " with no empty '.'-separated component" : " and contain no '.'");
}

}  // namespace

template <class T>
std::vector<Tensor<T>> Module<T>::parameters() const {
  std::vector<Tensor<T>> out;
  out.reserve(params_.size());
  for (const auto& p : params_) out.push_back(p.tensor);
  return out;
}

template <class T>
bool Module<T>::has_parameter(const std::string& name) const {
  return index_.count(name) > 0;
}

template <class T>
Tensor<T> Module<T>::parameter(const std::string& name) const {
  if (auto found = index_.find(name); found != index_.end()) return params_[found->second].tensor;
  std::string known;
  for (const auto& p : params_) known += (known.empty() ? "" : ", ") + p.name;
  fail("Module::parameter", "no parameter named '{}' (known: {})", name, known);
}

template <class T>
std::size_t Module<T>::parameter_count() const {
  std::size_t n = 0;
  for (const auto& p : params_) n += p.tensor.size();
  return n;
}

template <class T>
void Module<T>::zero_grad() {
  for (auto& p : params_) p.tensor.zero_grad();
}

template <class T>
void Module<T>::add(const char* op, const std::string& full_name, Tensor<T> tensor) {
  if (!index_.emplace(full_name, params_.size()).second)
    fail(op, "a parameter named '{}' is already registered", full_name);
  params_.push_back({full_name, std::move(tensor)});
}

template <class T>
Tensor<T> Module<T>::register_parameter(const std::string& name, Tensor<T> tensor) {
  check_name("Module::register_parameter", name, false);
  if (!tensor.defined())
    fail("Module::register_parameter", "parameter '{}' is an undefined tensor", name);
  tensor.set_requires_grad(true);
  add("Module::register_parameter", name, tensor);
  return tensor;
}

template <class T>
void Module<T>::register_module(const std::string& name, const Module<T>& child) {
  check_name("Module::register_module", name, true);
  for (const auto& p : child.named_parameters()) add("Module::register_module", name + "." + p.name, p.tensor);
}

template class Module<float>;
template class Module<double>;

}  // namespace tapegrad
