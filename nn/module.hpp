#pragma once
// Module<T>: a named collection of parameters. Parameters get hierarchical, stable names
// (`blocks.0.attn.Wq`) from the order in which modules register them, and that order is
// the order of named_parameters(), of initialisation and of checkpoints.
//
// A module holds Tensor handles, and a parent holds its children's handles too (under the
// child's prefix), so copying a module copies handles and shares the parameters, exactly
// as copying a Tensor does.
#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

#include "autograd/tensor.hpp"

namespace tapegrad {

template <class T>
struct NamedParameter {
  std::string name;
  Tensor<T> tensor;
};

template <class T>
class Module {
 public:
  Module() = default;
  Module(const Module&) = default;
  Module(Module&&) = default;
  Module& operator=(const Module&) = default;
  Module& operator=(Module&&) = default;
  virtual ~Module() = default;

  // Every parameter of this module and its children, in registration order.
  const std::vector<NamedParameter<T>>& named_parameters() const { return params_; }
  std::vector<Tensor<T>> parameters() const;
  // The parameter called `name`; throws ShapeError naming the known parameters if absent.
  Tensor<T> parameter(const std::string& name) const;
  bool has_parameter(const std::string& name) const;
  std::size_t parameter_count() const;  // total number of scalars
  void zero_grad();                     // drops every parameter's gradient

 protected:
  // Adds `tensor` (marked requires_grad) as `name`; a name is one non-empty path
  // component without '.', unique within this module.
  Tensor<T> register_parameter(const std::string& name, Tensor<T> tensor);
  // Adds every parameter of `child` as `name.<child's name>`; `name` may be a path such as
  // "blocks.0". Register a child after it is fully built: later additions to the child
  // are not seen by the parent.
  void register_module(const std::string& name, const Module<T>& child);

 private:
  void add(const char* op, const std::string& full_name, Tensor<T> tensor);
  std::vector<NamedParameter<T>> params_;
  // name -> position in params_: a model registers thousands of names, and checking each
  // new one against a list would make building it quadratic.
  std::unordered_map<std::string, std::size_t> index_;
};

extern template class Module<float>;
extern template class Module<double>;

}  // namespace tapegrad
