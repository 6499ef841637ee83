#include "autograd/tensor.hpp"

#include <algorithm>

#include "autograd/memory.hpp"
#include "autograd/shape.hpp"
#include "autograd/tape.hpp"
#include "autograd/tensor_impl.hpp"

namespace tapegrad {

// Referencing the memory policy links its start-up initialiser into every program that
// uses tensors (a static library drops object files nothing refers to).
[[maybe_unused]] static const bool g_memory_policy_linked = memory_reuse_enabled() || true;

double Generator::normal(double mean, double stddev) {
  return std::normal_distribution<double>(mean, stddev)(engine_);
}
double Generator::uniform(double low, double high) {
  return std::uniform_real_distribution<double>(low, high)(engine_);
}
std::uint64_t Generator::integer(std::uint64_t below) {
  if (below == 0) throw ShapeError("Generator::integer: the upper bound must be positive");
  return std::uniform_int_distribution<std::uint64_t>(0, below - 1)(engine_);
}

namespace {
template <class Extents, class Dims>
bool same_extents(const Extents& extents, const Dims& dims) {
  return std::equal(extents.begin(), extents.end(), dims.begin(), dims.end());
}
}  // namespace

template <class T>
Tensor<T>::Tensor(Array<T> value, bool requires_grad)
    : impl_(std::make_shared<TensorImpl<T>>(std::move(value), requires_grad)) {}

template <class T>
Tensor<T> Tensor<T>::zeros(const Shape& shape, bool requires_grad) {
  return full(shape, T(0), requires_grad);
}
template <class T>
Tensor<T> Tensor<T>::ones(const Shape& shape, bool requires_grad) {
  return full(shape, T(1), requires_grad);
}
template <class T>
Tensor<T> Tensor<T>::full(const Shape& shape, T value, bool requires_grad) {
  Array<T> a = Array<T>::from_shape(shape);
  a.fill(value);
  return Tensor(std::move(a), requires_grad);
}
template <class T>
Tensor<T> Tensor<T>::scalar(T value, bool requires_grad) {
  return full(Shape{}, value, requires_grad);
}
template <class T>
Tensor<T> Tensor<T>::from_array(Array<T> value, bool requires_grad) {
  return Tensor(std::move(value), requires_grad);
}
template <class T>
Tensor<T> Tensor<T>::randn(const Shape& shape, Generator& gen, T mean, T stddev,
                           bool requires_grad) {
  if (!gen.draws()) return zeros(shape, requires_grad);
  Array<T> a = Array<T>::from_shape(shape);
  for (T& x : a) x = static_cast<T>(gen.normal(mean, stddev));
  return Tensor(std::move(a), requires_grad);
}
template <class T>
Tensor<T> Tensor<T>::uniform(const Shape& shape, Generator& gen, T low, T high,
                             bool requires_grad) {
  if (!gen.draws()) return zeros(shape, requires_grad);
  Array<T> a = Array<T>::from_shape(shape);
  for (T& x : a) x = static_cast<T>(gen.uniform(low, high));
  return Tensor(std::move(a), requires_grad);
}

template <class T>
TensorImpl<T>& Tensor<T>::checked() const {
  if (!impl_)
    fail_with<UndefinedTensorError>("Tensor", "this handle is undefined (default-constructed, "
                                    "never assigned a tensor)");
  return *impl_;
}

template <class T>
Shape Tensor<T>::shape() const { return checked().shape(); }
template <class T>
std::size_t Tensor<T>::dim() const { return checked().value.dimension(); }
template <class T>
std::size_t Tensor<T>::size() const { return checked().value.size(); }
template <class T>
std::string Tensor<T>::shape_string() const { return shape_str(shape()); }
template <class T>
bool Tensor<T>::has_shape(const Shape& dims) const {
  return same_extents(checked().value.shape(), dims);
}
template <class T>
bool Tensor<T>::has_shape(std::initializer_list<std::size_t> dims) const {
  return same_extents(checked().value.shape(), dims);
}
template <class T>
const Array<T>& Tensor<T>::value() const { return checked().value; }
template <class T>
Array<T>& Tensor<T>::value() {
  TensorImpl<T>& impl = checked();
  impl.bump_version();  // handing out a writable value counts as a write
  return impl.value;
}
template <class T>
const T* Tensor<T>::data() const { return checked().value.data(); }

template <class T>
T Tensor<T>::item() const {
  const auto& v = checked().value;
  if (v.size() != 1)
    fail("item", "needs a tensor with exactly one element, got shape {}", shape_str(shape()));
  return v.data()[0];
}

template <class T>
bool Tensor<T>::requires_grad() const { return checked().requires_grad; }
template <class T>
Tensor<T>& Tensor<T>::set_requires_grad(bool requires) {
  checked().requires_grad = requires;
  return *this;
}
template <class T>
bool Tensor<T>::is_leaf() const { return checked().is_leaf; }
template <class T>
bool Tensor<T>::has_grad() const { return checked().has_grad; }
template <class T>
const Array<T>& Tensor<T>::grad() const {
  if (!checked().has_grad)
    fail_with<NoGradientError>("grad", "no gradient has reached this tensor of shape {} (did "
                               "backward run, and does it require grad?)", shape_str(shape()));
  return impl_->grad;
}
template <class T>
Array<T>& Tensor<T>::grad() {
  return const_cast<Array<T>&>(static_cast<const Tensor&>(*this).grad());
}
template <class T>
void Tensor<T>::zero_grad() {
  checked().grad = no_elements<T>();
  impl_->has_grad = false;
}
template <class T>
Tensor<T>& Tensor<T>::retain_grad() {
  checked().retains_grad = true;
  return *this;
}

template <class T>
void Tensor<T>::backward(bool retain_graph) const {
  if (size() != 1)
    fail("backward", "without a seed needs a one-element tensor, got shape {}; pass a seed "
         "of the same shape", shape_str(shape()));
  Array<T> seed = Array<T>::from_shape(shape());
  seed.fill(T(1));
  Tape<T>::active().backward(impl_, std::move(seed), retain_graph);
}

template <class T>
void Tensor<T>::backward(const Array<T>& seed, bool retain_graph) const {
  if (shape_of(seed) != shape())
    fail("backward", "the seed has shape {} but the tensor has shape {}",
         shape_str(shape_of(seed)), shape_str(shape()));
  Tape<T>::active().backward(impl_, seed, retain_graph);
}

template <class T>
Tensor<T> Tensor<T>::detach() const {
  return Tensor(Array<T>(checked().value), false);
}

template <class T>
long live_tensors() {
  return TensorImpl<T>::live.load();
}

template class Tensor<float>;
template class Tensor<double>;
template long live_tensors<float>();
template long live_tensors<double>();

}  // namespace tapegrad
