#pragma once
// Hook points: a model's intermediate activations under stable names (docs/HOOKS.md lists
// them with their shapes), which a caller can read (an ActivationCache), replace (ablate,
// patch) or differentiate against. A model with no Hooks attached pays one null-pointer
// test per point.
#include <cstddef>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tensor.hpp"

namespace tapegrad {

// fn(activation, name) -> what the model continues with: the activation itself, or a
// replacement of the same shape (computed from it on the tape, or a constant).
template <class T>
using HookFn = std::function<Tensor<T>(const Tensor<T>& activation, const std::string& name)>;

template <class T>
class Hooks;

// The activations one run kept, by name, in the order the forward reached them.
template <class T>
class ActivationCache {
 public:
  bool contains(const std::string& name) const { return find(name) != nullptr; }
  // The activation as the model used it (after any hook on that name); fails naming the
  // cached names when absent.
  const Tensor<T>& operator[](const std::string& name) const;
  // d output / d activation once a backward has run from something the run computed;
  // needs a cache taken with gradients.
  const Array<T>& grad(const std::string& name) const;
  std::vector<std::string> names() const;
  std::size_t size() const { return entries_.size(); }

 private:
  friend class Hooks<T>;
  const Tensor<T>* find(const std::string& name) const;
  std::vector<std::pair<std::string, Tensor<T>>> entries_;
  bool grads_ = false;
};

// What a run does at its hook points: functions by name, and which activations to keep.
template <class T>
class Hooks {
 public:
  // fn runs at the point `name` (several on one name run in the order added).
  void add(const std::string& name, HookFn<T> fn);
  // Keep these activations (empty: every point the run reaches); with `grads`, each kept
  // one that is on the tape also keeps its gradient, for ActivationCache::grad.
  void cache(std::vector<std::string> names = {}, bool grads = false);

  // A point calls visit(name) as the forward reaches it: true when something is to be done
  // there, which then apply() does (the functions, then the cache).
  bool visit(const std::string& name);
  Tensor<T> apply(const std::string& name, const Tensor<T>& x);
  // After a run: a name given to add() or cache() that no point of the model has is a
  // mistake (a typo, a layer the model lacks): fails naming it and the points there are.
  void check_reached(const char* op) const;

  // Whether functions are set at `name` (rather than only a cache), and whether the cache
  // keeps gradients: a path that cannot change or differentiate a point gives way then.
  bool changes(const std::string& name) const { return fns_.count(name) > 0; }
  bool caches_gradients() const { return cache_.grads_; }

  const ActivationCache<T>& activations() const { return cache_; }
  ActivationCache<T> take_activations() { return std::move(cache_); }

 private:
  bool wanted(const std::string& name) const;
  std::map<std::string, std::vector<HookFn<T>>> fns_;
  std::set<std::string> cache_names_;
  bool cache_all_ = false;
  std::vector<std::string> reached_;
  ActivationCache<T> cache_;
};

// The point `leaf` of block `layer`: block_point(1, "attn.pattern") is
// "blocks.1.attn.pattern"; block_points gives it for each of `layers` blocks, in order.
inline std::string block_point(std::size_t layer, const std::string& leaf) {
  return "blocks." + std::to_string(layer) + "." + leaf;
}
inline std::vector<std::string> block_points(std::size_t layers, const std::string& leaf) {
  std::vector<std::string> names;
  for (std::size_t l = 0; l < layers; ++l) names.push_back(block_point(l, leaf));
  return names;
}

// A module's handle on the run's hooks (none when `hooks` is null) and its place in the
// model: the point "attn.q" of the block whose prefix is "blocks.2." is "blocks.2.attn.q".
template <class T>
struct HookPoint {
  Hooks<T>* hooks = nullptr;
  std::string prefix;

  bool visit(const char* leaf) const { return hooks && hooks->visit(prefix + leaf); }
  Tensor<T> operator()(const char* leaf, const Tensor<T>& x) const {
    return visit(leaf) ? hooks->apply(prefix + leaf, x) : x;
  }
  // x (B, T, heads*width) shown at the point per head, (B, T, heads, width); whatever the
  // hooks return goes on as (B, T, heads*width).
  Tensor<T> per_head(const char* leaf, const Tensor<T>& x, std::size_t heads) const;
};

extern template class ActivationCache<float>;
extern template class ActivationCache<double>;
extern template class Hooks<float>;
extern template class Hooks<double>;
extern template struct HookPoint<float>;
extern template struct HookPoint<double>;

}  // namespace tapegrad
