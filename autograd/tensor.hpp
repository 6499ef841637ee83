#pragma once
// Tensor<T>: a cheap, shared handle to {value, grad, requires_grad}. Copying a Tensor
// copies the handle, never the data. T is float (training) or double (gradient checks).
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>

#include <xtensor/xarray.hpp>

#include "autograd/allocator.hpp"
#include "autograd/errors.hpp"

namespace tapegrad {

// A tensor's storage: row-major, 64-byte aligned, from an allocator whose freed blocks the
// next step reuses (autograd/allocator.hpp).
template <class T>
using Array = xt::xarray<T, xt::layout_type::row_major, TensorAllocator<T>>;

template <class T>
struct TensorImpl;  // autograd/tensor_impl.hpp; only ops and the engine look inside

// The explicit, seeded source of all randomness: same seed, same numbers (same machine
// and standard library).
class Generator {
 public:
  explicit Generator(std::uint64_t seed = 0) : engine_(seed) {}
  // A generator whose randn and uniform give zeros without drawing: for building a model
  // whose every parameter a loader overwrites next (124M normal draws take seconds).
  static Generator without_draws() {
    Generator g;
    g.draws_ = false;
    return g;
  }
  bool draws() const { return draws_; }
  std::mt19937_64& engine() { return engine_; }
  double normal(double mean = 0.0, double stddev = 1.0);
  double uniform(double low = 0.0, double high = 1.0);
  std::uint64_t integer(std::uint64_t below);  // uniform in [0, below)

 private:
  std::mt19937_64 engine_;
  bool draws_ = true;
};

// The type of a scalar operand of a Tensor<T> op: T itself, but spelled through a nested
// type, which the compiler does not deduce from. T then comes from the tensor alone and a
// scalar of any arithmetic type converts to it, as in NumPy and PyTorch (Tensor<float> *
// 2.0 stays a Tensor<float>); with a plain T, `x * 2.0` and `x + 1` would not compile
// ("deduced conflicting types").
template <class T>
struct ScalarOperand {
  using type = T;
};
template <class T>
using Scalar = typename ScalarOperand<T>::type;

template <class T>
class Tensor {
 public:
  Tensor() = default;  // an undefined handle; defined() is false
  explicit Tensor(Array<T> value, bool requires_grad = false);
  explicit Tensor(std::shared_ptr<TensorImpl<T>> impl) : impl_(std::move(impl)) {}

  static Tensor zeros(const Shape& shape, bool requires_grad = false);
  static Tensor ones(const Shape& shape, bool requires_grad = false);
  static Tensor full(const Shape& shape, T value, bool requires_grad = false);
  static Tensor scalar(T value, bool requires_grad = false);
  static Tensor from_array(Array<T> value, bool requires_grad = false);
  static Tensor randn(const Shape& shape, Generator& gen, T mean = T(0), T stddev = T(1),
                      bool requires_grad = false);
  static Tensor uniform(const Shape& shape, Generator& gen, T low = T(0), T high = T(1),
                        bool requires_grad = false);

  bool defined() const { return impl_ != nullptr; }
  Shape shape() const;
  std::size_t dim() const;
  std::size_t size() const;  // number of elements
  std::string shape_string() const;
  // shape() == dims, without building a Shape (ops check their operands on every call)
  bool has_shape(const Shape& dims) const;
  bool has_shape(std::initializer_list<std::size_t> dims) const;

  const Array<T>& value() const;
  // For in-place edits (optimisers, initialisers). A backward that needs the value as it
  // was when an op recorded it throws if it has changed since. (While a live graph saved
  // this tensor, the first call copies the value to tell an edit from a read; reading
  // through a const handle, std::as_const(t).value(), costs nothing.)
  Array<T>& value();
  const T* data() const;
  T item() const;  // the value of a one-element tensor

  bool requires_grad() const;
  Tensor& set_requires_grad(bool requires = true);
  bool is_leaf() const;  // made by the user, not by an op
  bool has_grad() const;
  const Array<T>& grad() const;  // throws if no gradient has reached this tensor
  Array<T>& grad();
  void zero_grad();  // drops the gradient (as PyTorch's set_to_none)
  // Keep the gradient of a non-leaf tensor after backward (leaves always keep theirs).
  Tensor& retain_grad();

  // Reverse-mode sweep over the nodes of this thread's tape that this tensor depends on,
  // seeded with d(this)/d(this) = 1; this tensor must hold one element. Frees those nodes
  // afterwards unless retain_graph (other graphs on the tape are left alone). Throws
  // GraphError, changing nothing, if the graph was freed or recorded on another thread.
  void backward(bool retain_graph = false) const;
  // The same, seeded with d(loss)/d(this) = seed (seed has this tensor's shape).
  void backward(const Array<T>& seed, bool retain_graph = false) const;

  Tensor detach() const;  // same value (copied), no history, no grad
  const std::shared_ptr<TensorImpl<T>>& impl() const { return impl_; }

 private:
  TensorImpl<T>& checked() const;
  std::shared_ptr<TensorImpl<T>> impl_;
};

// Tensors alive right now (for leak tests): every TensorImpl counts itself.
template <class T>
long live_tensors();

extern template class Tensor<float>;
extern template class Tensor<double>;

}  // namespace tapegrad
