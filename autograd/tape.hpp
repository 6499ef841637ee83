#pragma once
// The tape: a Wengert list. Every differentiable op, as it runs, appends one Node; one tape
// per thread and element type. backward(loss) walks the list in reverse (execution order
// is already a topological order, so there is no graph search and no recursion): one pass
// marks the nodes the loss depends on, a second runs their backward functions and
// accumulates gradients with += through sum_to, and the walked nodes are then released.
// Nodes of other graphs stay on the tape for their own backward.
//
// What keeps a gradient from being silently wrong (docs/RELIABILITY.md, "The graph"):
// - an op output knows when its node was released; a backward that reaches it throws
//   GraphError (a second backward, a new graph on a freed intermediate);
// - an output records which tape holds its node; reaching it from another thread throws;
// - every tensor has a version, bumped by Tensor::value(); a node keeps the versions of
//   its inputs and output, and a backward function reading one whose value changed since
//   throws (TensorImpl keeps a copy to tell an edit from a read through a non-const handle).
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/tensor.hpp"
#include "platform/execution.hpp"  // the precision each node runs its products at

namespace tapegrad {

// Sums `grad` over the axes along which an input of `shape` was broadcast, so that the
// result has exactly `shape`. The one place where broadcast gradients are reduced.
template <class T>
Array<T> sum_to(Array<T> grad, const Shape& shape);
// The same sum, always into a new array (the forward of sum and mean: `shape` has their
// reduced axes as 1).
template <class T>
Array<T> summed_to(const Array<T>& grad, const Shape& shape);
// Its adjoint: x copied to every place broadcasting it to `shape` puts it (the backward of
// sum and mean).
template <class T>
Array<T> broadcast_to(const Array<T>& x, const Shape& shape);
// An array of `shape` whose number at index (i_0, ..., i_{r-1}) is x's number at
// sum_k i_k * step[k] (a step of 0 repeats x along that axis): broadcast_to's copy, and
// transpose's with the steps permuted.
template <class T>
Array<T> strided_copy(const Array<T>& x, const Shape& shape, const std::vector<std::size_t>& step);

enum class History : std::uint8_t;  // autograd/tensor_impl.hpp

template <class T>
class BackwardContext;
template <class T>
using BackwardFn = std::function<void(BackwardContext<T>&)>;

// An input a node keeps for its backward, with the version it had. While it lives it
// counts in TensorImpl::saved_by, so that an edit of the tensor keeps a copy to compare.
template <class T>
struct SavedInput {
  explicit SavedInput(std::shared_ptr<TensorImpl<T>> t);
  SavedInput(SavedInput&& other) noexcept = default;  // leaves `other` empty, uncounted
  SavedInput& operator=(SavedInput&& other) = delete;
  ~SavedInput();
  std::shared_ptr<TensorImpl<T>> tensor;
  std::uint32_t version;  // the tensor's version when the node was recorded
};

template <class T>
struct Node {
  const char* op;  // a string literal: the op's name
  std::vector<SavedInput<T>> inputs;
  // Weak on purpose: a node never owns its output, so there is no cycle, and a result
  // nobody holds any more lets its node (and what the node keeps) be dropped.
  std::weak_ptr<TensorImpl<T>> output;
  TensorImpl<T>* out = nullptr;  // the same tensor, read only while `output` has not expired
  std::uint32_t output_version = 0;
  // The float32 product precision in force when the op ran: its backward runs at it too, so
  // where backward() is called (inside or outside a MatmulPrecisionGuard) changes nothing.
  kernels::MatmulPrecision precision = kernels::MatmulPrecision::f32;
  Shape output_shape;
  BackwardFn<T> backward;  // empty once the node is released
};

// What a node's backward function sees: the output's gradient and value, the inputs'
// values, and a way to hand each input its share of the gradient. Reading a value that
// was edited in place since the node was recorded throws GraphError.
template <class T>
class BackwardContext {
 public:
  // grad_spent: nothing reads the output's gradient after this node (an intermediate that
  // does not retain it), so take_grad() may move it.
  BackwardContext(Array<T>& grad, bool grad_spent, const TensorImpl<T>& output,
                  const Node<T>& node)
      : grad_(grad), grad_spent_(grad_spent), output_(output), node_(node) {}
  const Array<T>& grad() const {  // d(loss)/d(output)
    if (grad_taken_) read_after_take();
    return grad_;
  }
  // The output's gradient as an array of one's own, for an input that receives it
  // unchanged (add, reshape): moved out when it is spent, copied otherwise. It may leave
  // grad() empty, so it is the last read: a grad() or take_grad() after it throws
  // GraphError instead of handing out a moved-from array.
  Array<T> take_grad() {
    if (grad_taken_) read_after_take();
    grad_taken_ = true;
    return grad_spent_ ? std::move(grad_) : grad_;
  }
  const Array<T>& output() const;                     // the forward result
  const Array<T>& input(std::size_t i) const;         // the forward inputs' values
  bool wants(std::size_t i) const;                    // does input i require grad?
  std::size_t input_count() const { return node_.inputs.size(); }
  // d(loss)/d(input i) += sum_to(contribution, shape of input i)
  void accumulate(std::size_t i, Array<T> contribution);
  const char* op() const { return node_.op; }

 private:
  [[noreturn]] void read_after_take() const;
  Array<T>& grad_;
  bool grad_spent_;
  bool grad_taken_ = false;
  const TensorImpl<T>& output_;
  const Node<T>& node_;
};

template <class T>
class Tape {
 public:
  static Tape& active();  // this thread's tape of element type T (a TapeScope's while one lives)
  Tape() = default;
  Tape(const Tape&) = delete;
  Tape& operator=(const Tape&) = delete;
  ~Tape();  // what is still recorded becomes History::thread_ended

  void push(Node<T> node);
  std::size_t size() const { return nodes_.size(); }
  const std::vector<Node<T>>& nodes() const { return nodes_; }
  // Drops every node; their outputs become History::cleared (a backward through one throws).
  void clear();
  // One line per node, numbered from 0, each input named by where it comes from (the node
  // that made it, a leaf that requires grad, a constant, or an op output whose node a
  // backward freed) with its shape:
  //   #0 matmul leaf (2,6,16), leaf (16,16) -> (2,6,16)
  //   #1 add #0 (2,6,16), constant (16) -> (2,6,16)
  std::string to_string() const;

  // Seeds root's gradient and walks, from last to first, the nodes root depends on; then
  // releases them unless retain_graph. Nodes whose output is gone are released too.
  void backward(const std::shared_ptr<TensorImpl<T>>& root, Array<T> seed, bool retain_graph);

 private:
  void find_walk(TensorImpl<T>& root);
  void check_history(const TensorImpl<T>& t, const char* consumer) const;
  void release(const std::vector<std::size_t>& walked, bool keep_walked);
  void drop_all(History why);
  void drop_unreachable();
  std::vector<Node<T>> nodes_;
  std::vector<std::size_t> walk_;  // indices of the nodes the running backward walks, last first
  std::uint64_t epoch_ = 0;        // one per backward: TensorImpl::reached compares with it
  std::size_t next_prune_ = 4096;
};

// While alive, the ops of this thread record on a tape of its own, a fresh one, and a
// backward() from a tensor recorded there walks it; the tape active before (the thread's,
// or an enclosing scope's) is untouched and active again after it. Its nodes are dropped
// with it (what was recorded there becomes History::cleared). How a checkpointed block runs
// its forward again inside a backward without touching the tape being walked
// (autograd/checkpoint.hpp).
template <class T>
class TapeScope {
 public:
  TapeScope();
  ~TapeScope();
  TapeScope(const TapeScope&) = delete;
  TapeScope& operator=(const TapeScope&) = delete;

 private:
  Tape<T> tape_;
  Tape<T>* previous_;
};

// Records nothing while alive (inference, optimiser updates, finite differences).
class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};
bool grad_enabled();

// Anomaly mode (as torch.autograd.detect_anomaly): while a guard is alive, every op's
// output and every gradient an op's backward produces is checked for NaN and Inf, and the
// first one found throws AnomalyError naming the op and the shapes, or the op's input that
// already held the NaN/Inf when the op only carried it.
class AnomalyError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class AnomalyGuard {
 public:
  AnomalyGuard();
  ~AnomalyGuard();
  AnomalyGuard(const AnomalyGuard&) = delete;
  AnomalyGuard& operator=(const AnomalyGuard&) = delete;

 private:
  bool previous_;
};
bool anomaly_mode();

// An op's input tensors, as record() and will_record() take them: `{a, b}` at the call,
// or a vector (concatenate). A view, so only ever a parameter: the braced list lives until
// the end of the full expression that contains the call. Never keep one in a variable:
// `OpInputs<T> in = {a, b};` points at a list that is gone at the end of that statement.
template <class T>
class OpInputs {
 public:
  // (assigned in the body: GCC's -Winit-list-lifetime cannot tell a parameter from a
  // member that outlives the call, and this class is only ever the former)
  OpInputs(std::initializer_list<Tensor<T>> list) : size_(list.size()) { data_ = list.begin(); }
  OpInputs(const std::vector<Tensor<T>>& list) : data_(list.data()), size_(list.size()) {}
  const Tensor<T>* begin() const { return data_; }
  const Tensor<T>* end() const { return data_ + size_; }
  std::size_t size() const { return size_; }

 private:
  const Tensor<T>* data_;
  std::size_t size_;
};

// Whether record() will append a node for these inputs: grad is enabled and one of them
// requires grad. An op that keeps extra state for its backward asks this first.
template <class T>
bool will_record(OpInputs<T> inputs);
// The same with T deduced from a vector: will_record(parts). (Alloc keeps this overload
// out of will_record<T>({a, b}), where it would be ambiguous with the one above.)
template <class T, class Alloc>
bool will_record(const std::vector<Tensor<T>, Alloc>& inputs) {
  return will_record(OpInputs<T>(inputs));
}

namespace detail {
// std::type_identity (C++20): a parameter of type Identity<X>::type takes no part in
// deducing T, so record(op, inputs, value, backward) finds T from the value alone and
// also works without <T> when the inputs are a vector.
template <class X>
struct Identity {
  using type = X;
};

// record()'s two halves: the output (checked in anomaly mode), then the node.
template <class T>
std::shared_ptr<TensorImpl<T>> make_output(const char* op, OpInputs<T> inputs, Array<T>&& value);
template <class T>
void push_node(const char* op, OpInputs<T> inputs, const std::shared_ptr<TensorImpl<T>>& out,
               BackwardFn<T> backward);
}  // namespace detail

// The one way an op joins the tape: wraps `value` in a new tensor and, when
// will_record(inputs), appends a node with `backward` (a callable taking
// BackwardContext<T>&). Only then does it become a BackwardFn: without grad (inference,
// evaluation) an op allocates its output and nothing else.
template <class T, class Backward>
Tensor<T> record(const char* op, typename detail::Identity<OpInputs<T>>::type inputs,
                 Array<T> value, Backward&& backward) {
  std::shared_ptr<TensorImpl<T>> out = detail::make_output(op, inputs, std::move(value));
  if (will_record(inputs))
    detail::push_node(op, inputs, out, BackwardFn<T>(std::forward<Backward>(backward)));
  return Tensor<T>(std::move(out));
}

// Prints the active tape of element type T.
template <class T>
std::string tape_string() {
  return Tape<T>::active().to_string();
}

extern template struct SavedInput<float>;
extern template struct SavedInput<double>;
extern template class Tape<float>;
extern template class Tape<double>;
extern template class BackwardContext<float>;
extern template class BackwardContext<double>;
extern template class TapeScope<float>;
extern template class TapeScope<double>;

}  // namespace tapegrad
