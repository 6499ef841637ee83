#include "autograd/tape.hpp"

#include <algorithm>
#include <cmath>

#include "autograd/tensor_impl.hpp"

namespace tapegrad {

namespace {
thread_local bool g_grad_enabled = true;
thread_local bool g_anomaly = false;

template <class T>
bool all_finite(const Array<T>& a) {
  for (const T& v : a)
    if (!std::isfinite(v)) return false;
  return true;
}

template <class T>
std::string input_shapes(OpInputs<T> inputs) {
  std::vector<std::string> s;
  for (const Tensor<T>& t : inputs) s.push_back(t.shape_string());
  return fmt::format("{}", fmt::join(s, ", "));
}
}  // namespace

NoGradGuard::NoGradGuard() : previous_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = previous_; }
bool grad_enabled() { return g_grad_enabled; }

AnomalyGuard::AnomalyGuard() : previous_(g_anomaly) { g_anomaly = true; }
AnomalyGuard::~AnomalyGuard() { g_anomaly = previous_; }
bool anomaly_mode() { return g_anomaly; }

template <class T>
const Array<T>& BackwardContext<T>::input(std::size_t i) const {
  return inputs_.at(i)->value;
}

template <class T>
bool BackwardContext<T>::wants(std::size_t i) const {
  return inputs_.at(i)->requires_grad;
}

template <class T>
void BackwardContext<T>::accumulate(std::size_t i, Array<T> contribution) {
  TensorImpl<T>& input = *inputs_.at(i);
  if (!input.requires_grad) return;
  Array<T> reduced = sum_to<T>(std::move(contribution), input.shape());
  if (g_anomaly && !all_finite(reduced))
    throw AnomalyError(fmt::format(
        "anomaly: the backward of {} produced a non-finite gradient for its input {} of shape {}",
        op_, i, shape_str(input.shape())));
  if (input.has_grad) {
    input.grad += reduced;
  } else {
    input.grad = std::move(reduced);
    input.has_grad = true;
  }
}

template <class T>
Tape<T>& Tape<T>::active() {
  thread_local Tape<T> tape;
  return tape;
}

template <class T>
void Tape<T>::push(Node<T> node) {
  nodes_.push_back(std::move(node));
  if (nodes_.size() >= next_prune_) {
    drop_unreachable();
    next_prune_ = std::max<std::size_t>(4096, 2 * nodes_.size());
  }
}

// A forward pass whose result is dropped without backward (evaluation without a
// NoGradGuard) would otherwise grow the tape forever. A node whose output is gone can
// never receive a gradient; dropping it releases its inputs, which may orphan earlier
// nodes, so one sweep from the back finds them all.
template <class T>
void Tape<T>::drop_unreachable() {
  std::vector<bool> dead(nodes_.size(), false);
  for (std::size_t i = nodes_.size(); i-- > 0;) {
    if (nodes_[i].output.expired()) {
      dead[i] = true;
      nodes_[i].inputs.clear();
      nodes_[i].backward = nullptr;
    }
  }
  std::size_t kept = 0;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (dead[i]) continue;
    if (kept != i) nodes_[kept] = std::move(nodes_[i]);  // never self-move: it empties
    ++kept;
  }
  nodes_.resize(kept);
}

template <class T>
void Tape<T>::clear() {
  // Release from the back so freeing is in reverse creation order.
  while (!nodes_.empty()) nodes_.pop_back();
  nodes_.shrink_to_fit();
  next_prune_ = 4096;
}

template <class T>
std::string Tape<T>::to_string() const {
  std::string out;
  for (const Node<T>& node : nodes_) {
    std::vector<std::string> inputs;
    for (const auto& in : node.inputs) inputs.push_back(shape_str(in->shape()));
    out += fmt::format("{} {} -> {}\n", node.op, fmt::join(inputs, ", "),
                       shape_str(node.output_shape));
  }
  return out;
}

template <class T>
void Tape<T>::backward(const std::shared_ptr<TensorImpl<T>>& root, Array<T> seed,
                       bool retain_graph) {
  if (!root->requires_grad)
    fail("backward", "the tensor of shape {} does not require grad and has no history",
         shape_str(root->shape()));
  // A gradient kept from an earlier backward (a retained intermediate's, the root's) must
  // not flow through the graph again: each sweep propagates only its own gradient. Such
  // gradients are set aside and added back afterwards, so .grad accumulates as in PyTorch.
  struct Kept {
    std::shared_ptr<TensorImpl<T>> tensor;
    Array<T> grad;
  };
  std::vector<Kept> kept;
  auto set_aside = [&kept](const std::shared_ptr<TensorImpl<T>>& t) {
    if (!t || !t->has_grad || t->is_leaf) return;
    kept.push_back({t, std::move(t->grad)});
    t->grad = no_elements<T>();
    t->has_grad = false;
  };
  set_aside(root);
  for (const Node<T>& node : nodes_) set_aside(node.output.lock());
  if (root->has_grad) {  // a leaf root: it has no node, so its gradient flows nowhere
    root->grad += seed;
  } else {
    root->grad = std::move(seed);
    root->has_grad = true;
  }
  // On every exit, also through an exception mid-sweep (anomaly mode): the kept gradients
  // come back, and half-used nodes are not left behind.
  struct OnExit {
    Tape& tape;
    bool retain;
    std::vector<Kept>& kept;
    ~OnExit() {
      for (Kept& k : kept) {
        if (k.tensor->has_grad) {
          k.tensor->grad += k.grad;
        } else {
          k.tensor->grad = std::move(k.grad);
          k.tensor->has_grad = true;
        }
      }
      if (!retain) tape.clear();
    }
  } on_exit{*this, retain_graph, kept};
  // Outputs stay alive through the sweep (later nodes hold them as inputs), so a
  // gradient that reaches a node's output is still there when its turn comes.
  for (std::size_t i = nodes_.size(); i-- > 0;) {
    Node<T>& node = nodes_[i];
    std::shared_ptr<TensorImpl<T>> out = node.output.lock();
    if (!out || !out->has_grad) continue;
    const bool spent = !out->retains_grad && out != root;
    BackwardContext<T> ctx(out->grad, spent, out->value, node.inputs, node.op);
    node.backward(ctx);
    if (spent) {
      out->grad = no_elements<T>();  // an intermediate's gradient is spent
      out->has_grad = false;
    }
  }
  if (!root->is_leaf && !root->retains_grad) {
    root->grad = no_elements<T>();
    root->has_grad = false;
  }
}

template <class T>
bool will_record(OpInputs<T> inputs) {
  if (!g_grad_enabled) return false;
  for (const Tensor<T>& in : inputs)
    if (in.requires_grad()) return true;
  return false;
}

namespace detail {

template <class T>
std::shared_ptr<TensorImpl<T>> make_output(const char* op, OpInputs<T> inputs, Array<T> value) {
  if (g_anomaly && !all_finite(value))
    throw AnomalyError(fmt::format("anomaly: {} produced a non-finite value: inputs {} -> {}", op,
                                   input_shapes(inputs), shape_str(shape_of(value))));
  return std::make_shared<TensorImpl<T>>(std::move(value));
}

template <class T>
void push_node(const char* op, OpInputs<T> inputs, const std::shared_ptr<TensorImpl<T>>& out,
               BackwardFn<T> backward) {
  out->requires_grad = true;
  out->is_leaf = false;
  Node<T> node;
  node.op = op;
  node.inputs.reserve(inputs.size());
  for (const Tensor<T>& in : inputs) node.inputs.push_back(in.impl());
  node.output = out;
  node.output_shape = out->shape();
  node.backward = std::move(backward);
  Tape<T>::active().push(std::move(node));
}

}  // namespace detail

#define TAPEGRAD_INSTANTIATE(T)                                                          \
  template bool will_record(OpInputs<T>);                                                \
  template std::shared_ptr<TensorImpl<T>> detail::make_output(const char*, OpInputs<T>,   \
                                                              Array<T>);                 \
  template void detail::push_node(const char*, OpInputs<T>,                              \
                                  const std::shared_ptr<TensorImpl<T>>&, BackwardFn<T>); \
  template class BackwardContext<T>;                                                     \
  template class Tape<T>;
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad
