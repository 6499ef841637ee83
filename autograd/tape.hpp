#pragma once
// The tape: a Wengert list. Every differentiable op, as it runs, appends one Node;
// backward() walks the list once in reverse (execution order is already a topological
// order, so there is no graph search and no recursion), accumulates gradients with +=
// through sum_to, and then clears the list.
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/tensor.hpp"

namespace tapegrad {

// Sums `grad` over the axes along which an input of `shape` was broadcast, so that the
// result has exactly `shape`. The one place where broadcast gradients are reduced.
template <class T>
Array<T> sum_to(Array<T> grad, const Shape& shape);

// What a node's backward function sees: the output's gradient and value, the inputs'
// values, and a way to hand each input its share of the gradient.
template <class T>
class BackwardContext {
 public:
  // grad_spent: nothing reads the output's gradient after this node (an intermediate that
  // does not retain it), so take_grad() may move it.
  BackwardContext(Array<T>& grad, bool grad_spent, const Array<T>& output,
                  const std::vector<std::shared_ptr<TensorImpl<T>>>& inputs, const char* op)
      : grad_(grad), grad_spent_(grad_spent), output_(output), inputs_(inputs), op_(op) {}
  const Array<T>& grad() const { return grad_; }      // d(loss)/d(output)
  // The output's gradient as an array of one's own, for an input that receives it
  // unchanged (add, reshape): moved out when it is spent, copied otherwise. Call it after
  // the last use of grad(), which may be empty afterwards.
  Array<T> take_grad() { return grad_spent_ ? std::move(grad_) : grad_; }
  const Array<T>& output() const { return output_; }  // the forward result
  const Array<T>& input(std::size_t i) const;         // the forward inputs' values
  bool wants(std::size_t i) const;                    // does input i require grad?
  // d(loss)/d(input i) += sum_to(contribution, shape of input i)
  void accumulate(std::size_t i, Array<T> contribution);
  const char* op() const { return op_; }

 private:
  Array<T>& grad_;
  bool grad_spent_;
  const Array<T>& output_;
  const std::vector<std::shared_ptr<TensorImpl<T>>>& inputs_;
  const char* op_;
};

template <class T>
using BackwardFn = std::function<void(BackwardContext<T>&)>;

template <class T>
struct Node {
  const char* op;  // a string literal: the op's name
  std::vector<std::shared_ptr<TensorImpl<T>>> inputs;
  // Weak on purpose: a node never owns its output, so there is no cycle, and a result
  // nobody holds any more lets its node (and what the node keeps) be dropped.
  std::weak_ptr<TensorImpl<T>> output;
  Shape output_shape;
  BackwardFn<T> backward;
};

template <class T>
class Tape {
 public:
  static Tape& active();  // one tape per thread and element type

  void push(Node<T> node);
  std::size_t size() const { return nodes_.size(); }
  const std::vector<Node<T>>& nodes() const { return nodes_; }
  void clear();
  // One line per node: "matmul (2,6,16), (16,16) -> (2,6,16)".
  std::string to_string() const;

  // Seeds root's gradient, walks the nodes from last to first, then clears the tape
  // unless retain_graph.
  void backward(const std::shared_ptr<TensorImpl<T>>& root, Array<T> seed, bool retain_graph);

 private:
  void drop_unreachable();
  std::vector<Node<T>> nodes_;
  std::size_t next_prune_ = 4096;
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
// first one found throws AnomalyError naming the op and the shapes.
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
std::shared_ptr<TensorImpl<T>> make_output(const char* op, OpInputs<T> inputs, Array<T> value);
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

extern template class Tape<float>;
extern template class Tape<double>;
extern template class BackwardContext<float>;
extern template class BackwardContext<double>;

}  // namespace tapegrad
