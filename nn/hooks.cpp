#include "nn/hooks.hpp"

#include <algorithm>

#include "autograd/errors.hpp"
#include "ops/shape_ops.hpp"

namespace tapegrad {

namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

}  // namespace

template <class T>
const Tensor<T>* ActivationCache<T>::find(const std::string& name) const {
  for (const auto& [n, t] : entries_)
    if (n == name) return &t;
  return nullptr;
}

template <class T>
const Tensor<T>& ActivationCache<T>::operator[](const std::string& name) const {
  if (const Tensor<T>* t = find(name)) return *t;
  fail("ActivationCache", "no activation named '{}' was cached (cached: {})", name,
       joined(names()));
}

template <class T>
const Array<T>& ActivationCache<T>::grad(const std::string& name) const {
  const Tensor<T>& t = (*this)[name];
  if (!grads_)
    fail("ActivationCache::grad", "the cache of '{}' {} was taken without gradients (ask for "
         "them when caching)", name, t.shape_string());
  if (!t.has_grad())
    fail("ActivationCache::grad", "no gradient reached '{}' {}: run backward from the run's "
         "output first (and not under no_grad)", name, t.shape_string());
  return t.grad();
}

template <class T>
std::vector<std::string> ActivationCache<T>::names() const {
  std::vector<std::string> out;
  for (const auto& entry : entries_) out.push_back(entry.first);
  return out;
}

template <class T>
void Hooks<T>::add(const std::string& name, HookFn<T> fn) {
  if (!fn) fail("Hooks::add", "the function for '{}' is empty", name);
  fns_[name].push_back(std::move(fn));
}

template <class T>
void Hooks<T>::cache(std::vector<std::string> names, bool grads) {
  cache_all_ = names.empty();
  cache_names_ = std::set<std::string>(names.begin(), names.end());
  cache_.grads_ = grads;
}

template <class T>
bool Hooks<T>::wanted(const std::string& name) const {
  return fns_.count(name) > 0 || cache_all_ || cache_names_.count(name) > 0;
}

template <class T>
bool Hooks<T>::visit(const std::string& name) {
  reached_.push_back(name);
  return wanted(name);
}

// Every function in turn, each checked to keep the shape (the model's next op would fail
// far from the cause otherwise), then the result is what gets cached.
template <class T>
Tensor<T> Hooks<T>::apply(const std::string& name, const Tensor<T>& x) {
  Tensor<T> y = x;
  if (auto it = fns_.find(name); it != fns_.end())
    for (const HookFn<T>& fn : it->second) {
      Tensor<T> out = fn(y, name);
      if (!out.defined() || out.shape() != y.shape())
        fail("hook", "the function at '{}' returned {} for an activation of shape {}", name,
             out.defined() ? out.shape_string() : std::string("an undefined tensor"),
             y.shape_string());
      y = std::move(out);
    }
  if (cache_all_ || cache_names_.count(name)) {
    if (cache_.grads_ && y.requires_grad()) y.retain_grad();
    cache_.entries_.emplace_back(name, y);
  }
  return y;
}

template <class T>
void Hooks<T>::check_reached(const char* op) const {
  std::vector<std::string> asked(cache_names_.begin(), cache_names_.end());
  for (const auto& entry : fns_) asked.push_back(entry.first);
  for (const std::string& name : asked)
    if (std::find(reached_.begin(), reached_.end(), name) == reached_.end())
      fail(op, "no hook point named '{}' in this model (its points: {})", name, joined(reached_));
}

template <class T>
Tensor<T> HookPoint<T>::per_head(const char* leaf, const Tensor<T>& x, std::size_t heads) const {
  if (!visit(leaf)) return x;
  const Shape s = x.shape();
  const Tensor<T> seen = hooks->apply(prefix + leaf, reshape(x, Shape{s[0], s[1], heads, s[2] / heads}));
  return reshape(seen, s);
}

template class ActivationCache<float>;
template class ActivationCache<double>;
template class Hooks<float>;
template class Hooks<double>;
template struct HookPoint<float>;
template struct HookPoint<double>;

}  // namespace tapegrad
