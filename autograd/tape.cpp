#include "autograd/tape.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <utility>

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

// "NaN" or "Inf" after the first non-finite element of a, nullptr when there is none.
template <class T>
const char* nonfinite_kind(const Array<T>& a) {
  for (const T& v : a)
    if (!std::isfinite(v)) return std::isnan(v) ? "NaN" : "Inf";
  return nullptr;
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

namespace {
// Cold and out of line: the check it guards runs on every saved value a backward reads.
[[noreturn]] void modified_in_place(const char* op, const std::string& what,
                                    std::uint32_t recorded, std::uint32_t now) {
  fail_with<GraphError>(
      "backward", "{} that {} saved for backward was modified in place after {} recorded it "
      "(version {}, now {}), so its gradient would be wrong; edit a detach()ed copy, or run {} "
      "again after the edit (writing through Tensor::value() counts as an edit)",
      what, op, op, recorded, now, op);
}

// By rvalue reference: moving an xarray into a by-value parameter costs a construction
// (its shape and strides copied), about 5 % of a chain of small ops.
template <class T>
void add_grad_unlocked(TensorImpl<T>& t, Array<T>&& g) {
  if (t.has_grad) {
    // g has t's shape (accumulate folded it with sum_to): one flat loop, not xtensor's
    // broadcasting assignment. The gradient held may not, if the tensor's value was
    // replaced by one of another shape since.
    const auto& held = t.grad.shape();
    if (!std::equal(held.begin(), held.end(), g.shape().begin(), g.shape().end()))
      fail("backward", "a gradient of shape {} cannot be added to the gradient of shape {} "
           "held from an earlier backward (was the tensor's value replaced? zero_grad() first)",
           shape_str(shape_of(g)), shape_str(shape_of(t.grad)));
    T* sum = t.grad.data();
    const T* add = g.data();
    const std::size_t n = t.grad.size();
#pragma omp simd
    for (std::size_t i = 0; i < n; ++i) sum[i] += add[i];
  } else {
    t.grad = std::move(g);
    t.has_grad = true;
  }
}

// A leaf may receive gradients from the backwards of several threads at once (a shared
// parameter): its accumulation takes the leaf's lock. An op output is one thread's.
template <class T>
void add_grad(TensorImpl<T>& t, Array<T>&& g) {
  if (!t.is_leaf) return add_grad_unlocked(t, std::move(g));
  std::lock_guard<std::mutex> lock(t.mutex);
  add_grad_unlocked(t, std::move(g));
}
}  // namespace

// A leaf may be shared by threads: its version is read and its saves counted under its
// mutex, the one bump_version holds, so that an edit through another thread's handle
// either comes first (this node keeps the new version) or sees this save and keeps a copy
// of the value at this version. Read apart, a bump between the two went uncopied, and the
// backward took a mere read on another thread for an in-place edit.
template <class T>
SavedInput<T>::SavedInput(std::shared_ptr<TensorImpl<T>> t) : tensor(std::move(t)) {
  std::unique_lock<std::mutex> lock(tensor->mutex, std::defer_lock);
  if (tensor->is_leaf) lock.lock();
  version = tensor->version.load(std::memory_order_relaxed);
  tensor->saved_by.fetch_add(1, std::memory_order_relaxed);
  tensor->saves.fetch_add(1, std::memory_order_relaxed);
}

template <class T>
SavedInput<T>::~SavedInput() {
  if (!tensor) return;  // moved from
  tensor->saved_by.fetch_sub(1, std::memory_order_relaxed);
  tensor->drop_snapshots_if_unsaved();
}

template <class T>
const Array<T>& BackwardContext<T>::input(std::size_t i) const {
  const SavedInput<T>& in = node_.inputs.at(i);
  if (in.tensor->version != in.version && in.tensor->changed_since(in.version))
    modified_in_place(node_.op, fmt::format("one of the inputs (input {} of shape {})", i,
                                            shape_str(in.tensor->shape())),
                      in.version, in.tensor->version);
  return in.tensor->value;
}

template <class T>
const Array<T>& BackwardContext<T>::output() const {
  if (output_.version != node_.output_version && output_.changed_since(node_.output_version))
    modified_in_place(node_.op, fmt::format("the output (of shape {})", shape_str(output_.shape())),
                      node_.output_version, output_.version);
  return output_.value;
}

template <class T>
void BackwardContext<T>::read_after_take() const {
  fail_with<GraphError>(node_.op, "its backward read the output's gradient after take_grad(), "
                        "which may have moved it away; call take_grad() last");
}

template <class T>
bool BackwardContext<T>::wants(std::size_t i) const {
  return node_.inputs.at(i).tensor->requires_grad;
}

template <class T>
void BackwardContext<T>::accumulate(std::size_t i, Array<T> contribution) {
  TensorImpl<T>& input = *node_.inputs.at(i).tensor;
  if (!input.requires_grad) return;
  // The common case, a contribution of the input's own shape, skips sum_to: building the
  // two Shapes it compares would allocate twice per gradient.
  const auto& have = contribution.shape();
  const auto& want = input.value.shape();
  if (!std::equal(have.begin(), have.end(), want.begin(), want.end()))
    contribution = sum_to<T>(std::move(contribution), input.shape());
  if (g_anomaly && !all_finite(contribution)) {
    for (std::size_t j = 0; j < node_.inputs.size(); ++j)
      if (const char* kind = nonfinite_kind(node_.inputs[j].tensor->value))
        throw AnomalyError(fmt::format(
            "anomaly: input {} of {} already holds {}, so the backward's non-finite gradient "
            "for its input {} of shape {} starts there, not in {}",
            j, node_.op, kind, i, shape_str(input.shape()), node_.op));
    throw AnomalyError(fmt::format(
        "anomaly: the backward of {} produced a non-finite gradient for its input {} of shape {}",
        node_.op, i, shape_str(input.shape())));
  }
  add_grad(input, std::move(contribution));
}

namespace {
// The innermost TapeScope's tape on this thread, or null.
template <class T>
Tape<T>*& scoped_tape() {
  thread_local Tape<T>* tape = nullptr;
  return tape;
}
}  // namespace

template <class T>
Tape<T>& Tape<T>::active() {
  thread_local Tape<T> tape;
  Tape<T>* scoped = scoped_tape<T>();
  return scoped ? *scoped : tape;
}

template <class T>
TapeScope<T>::TapeScope() : previous_(scoped_tape<T>()) {
  scoped_tape<T>() = &tape_;
}

template <class T>
TapeScope<T>::~TapeScope() {
  scoped_tape<T>() = previous_;
  tape_.clear();
}

template <class T>
Tape<T>::~Tape() {
  drop_all(History::thread_ended);
}

template <class T>
void Tape<T>::push(Node<T> node) {
  nodes_.push_back(std::move(node));
  if (nodes_.size() >= next_prune_) {
    drop_unreachable();
    next_prune_ = std::max<std::size_t>(4096, 2 * nodes_.size());
  }
}

// Releases, from the back, the nodes in `walked` (indices, last first) unless keep_walked,
// and every node whose output is gone: it can never receive a gradient, and releasing its
// inputs may orphan earlier nodes, which the same pass then finds. A released node's
// output, if someone still holds it, learns that its history is gone.
template <class T>
void Tape<T>::release(const std::vector<std::size_t>& walked, bool keep_walked) {
  if (!keep_walked && walked.size() == nodes_.size()) {
    // The usual training step: the loss depends on every node. One pass, as drop_all.
    drop_all(History::freed);
    return;
  }
  std::size_t w = 0;
  for (std::size_t i = nodes_.size(); i-- > 0;) {
    Node<T>& node = nodes_[i];
    const bool was_walked = w < walked.size() && walked[w] == i;
    w += was_walked;
    const bool dead = node.output.expired();
    if (!dead && (keep_walked || !was_walked)) continue;
    if (!dead) node.out->forget_history(History::freed);
    node.inputs.clear();
    node.backward = nullptr;
  }
  std::size_t kept = 0;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i].backward) continue;
    if (kept != i) nodes_[kept] = std::move(nodes_[i]);  // never self-move: it empties
    ++kept;
  }
  nodes_.resize(kept);
  if (nodes_.empty()) {  // as clear(): the next step starts from a fresh list
    nodes_.shrink_to_fit();
    next_prune_ = 4096;
  }
}

// A forward pass whose result is dropped without backward (evaluation without a
// NoGradGuard) would otherwise grow the tape forever.
template <class T>
void Tape<T>::drop_unreachable() {
  static const std::vector<std::size_t> none;
  release(none, true);
}

template <class T>
void Tape<T>::drop_all(History why) {
  // Release from the back so freeing is in reverse creation order.
  while (!nodes_.empty()) {
    std::shared_ptr<TensorImpl<T>> out = nodes_.back().output.lock();
    nodes_.pop_back();  // first: its saved inputs no longer count when out forgets
    if (out) out->forget_history(why);
  }
  nodes_.shrink_to_fit();
  next_prune_ = 4096;
}

template <class T>
void Tape<T>::clear() {
  drop_all(History::cleared);
}

namespace {
// How the tape printout names where an input comes from.
template <class T>
std::string input_source(const TensorImpl<T>& input,
                         const std::unordered_map<const TensorImpl<T>*, std::size_t>& made_by) {
  if (const auto it = made_by.find(&input); it != made_by.end()) return fmt::format("#{}", it->second);
  switch (input.history) {
    case History::leaf: return input.requires_grad ? "leaf" : "constant";
    case History::recorded: return "another tape";
    default: return "freed";  // a backward released its node, or the tape was cleared
  }
}
}  // namespace

template <class T>
std::string Tape<T>::to_string() const {
  // Node numbers by output, so that each input can say which node made it. Only live
  // outputs are keyed: an expired one's address may already belong to a newer tensor.
  std::unordered_map<const TensorImpl<T>*, std::size_t> made_by;
  std::string out;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const Node<T>& node = nodes_[i];
    std::vector<std::string> inputs;
    for (const SavedInput<T>& in : node.inputs) {
      inputs.push_back(fmt::format("{} {}", input_source(*in.tensor, made_by),
                                   shape_str(in.tensor->shape())));
    }
    out += fmt::format("#{} {} {} -> {}\n", i, node.op, fmt::join(inputs, ", "),
                       shape_str(node.output_shape));
    if (!node.output.expired()) made_by.emplace(node.out, i);
  }
  return out;
}

// An op output reached by a backward must have its node on this tape; anything else would
// give a missing gradient without a word.
template <class T>
void Tape<T>::check_history(const TensorImpl<T>& t, const char* consumer) const {
  if (t.history == History::recorded && t.tape == this) return;
  const std::string what =
      consumer ? fmt::format("an input of {} (shape {}, made by {})", consumer,
                             shape_str(t.shape()), t.op)
               : fmt::format("this tensor (shape {}, made by {})", shape_str(t.shape()), t.op);
  switch (t.history) {
    case History::recorded:
      fail_with<GraphError>("backward", "{} was recorded on another thread's tape; tapegrad "
                            "keeps one tape per thread, so call backward on the thread that "
                            "ran the forward", what);
    case History::cleared:
      fail_with<GraphError>("backward", "{} has no history: Tape::clear() dropped the node of "
                            "{} and what it saved for backward", what, t.op);
    case History::thread_ended:
      fail_with<GraphError>("backward", "{} was recorded on a thread that has ended, and its "
                            "tape with it; call backward on the thread that ran the forward",
                            what);
    default:
      fail_with<GraphError>("backward", "{} was already backpropagated: that backward freed "
                            "what {} saved for its gradient. To backward through the graph a "
                            "second time, pass retain_graph = true to the first backward; to "
                            "use the value as a constant, detach() it", what, t.op);
  }
}

// The reachability pass: a node is walked when its output was reached (the root, or an
// input of a walked node); creation order is a topological order, so one reverse pass
// finds them all. Its cost is a liveness check and a compare per node and a store per
// input of a walked node. Every error it finds is thrown before any gradient moves.
template <class T>
void Tape<T>::find_walk(TensorImpl<T>& root) {
  walk_.clear();
  if (root.is_leaf) return;
  check_history(root, nullptr);
  root.reached = ++epoch_;
  for (std::size_t i = nodes_.size(); i-- > 0;) {
    const Node<T>& node = nodes_[i];
    if (node.output.expired() || node.out->reached != epoch_) continue;
    walk_.push_back(i);
    for (const SavedInput<T>& in : node.inputs) {
      TensorImpl<T>& t = *in.tensor;
      if (t.is_leaf) continue;  // a leaf has no node, and may be shared between threads
      check_history(t, node.op);
      t.reached = epoch_;
    }
  }
}

template <class T>
void Tape<T>::backward(const std::shared_ptr<TensorImpl<T>>& root, Array<T> seed,
                       bool retain_graph) {
  if (!root->requires_grad)
    fail("backward", "the tensor of shape {} does not require grad and has no history",
         shape_str(root->shape()));
  find_walk(*root);
  // A gradient kept from an earlier backward (a retained intermediate's, the root's) must
  // not flow through the graph again: each sweep propagates only its own gradient. Such
  // gradients are set aside and added back afterwards, so .grad accumulates as in PyTorch.
  struct Kept {
    std::shared_ptr<TensorImpl<T>> tensor;
    Array<T> grad;
  };
  std::vector<Kept> kept;
  auto set_aside = [&kept](const std::shared_ptr<TensorImpl<T>>& t) {
    if (!t->has_grad || t->is_leaf) return;
    kept.push_back({t, std::move(t->grad)});
    t->grad = no_elements<T>();
    t->has_grad = false;
  };
  // Without retain_graph each node lets go of what it saved as soon as its backward has
  // run, and of its output once that output's own node has run (its gradient lives in
  // it): the activations of the layers already differentiated are freed while the earlier
  // layers' gradients are made, so a training step's peak is its forward's, not the
  // forward's plus every parameter's gradient. `held` keeps each walked output alive until
  // its node has run, when the nodes that consumed it may already have let it go.
  std::vector<std::shared_ptr<TensorImpl<T>>> held;
  held.reserve(walk_.size());
  for (std::size_t i : walk_) held.push_back(nodes_[i].output.lock());  // alive: find_walk
  set_aside(root);
  for (const auto& out : held) set_aside(out);
  add_grad(*root, std::move(seed));  // a leaf root has no node: its gradient flows nowhere
  // On every exit, also through an exception mid-sweep (anomaly mode, a value edited in
  // place): the kept gradients come back, and half-used nodes are not left behind.
  struct OnExit {
    Tape& tape;
    bool retain;
    std::vector<Kept>& kept;
    ~OnExit() {
      for (Kept& k : kept) add_grad(*k.tensor, std::move(k.grad));
      tape.release(tape.walk_, retain);
    }
  } on_exit{*this, retain_graph, kept};
  kernels::MatmulPrecisionGuard caller_precision(kernels::matmul_precision());
  for (std::size_t w = 0; w < walk_.size(); ++w) {
    Node<T>& node = nodes_[walk_[w]];
    TensorImpl<T>& out = *held[w];
    if (out.has_grad) {
      const bool spent = !out.retains_grad && &out != root.get();
      BackwardContext<T> ctx(out.grad, spent, out, node);
      kernels::set_matmul_precision(node.precision);
      node.backward(ctx);
      if (spent) {
        out.grad = no_elements<T>();  // an intermediate's gradient is spent
        out.has_grad = false;
      }
    }
    if (retain_graph) continue;
    node.inputs.clear();
    node.backward = nullptr;
    held[w].reset();
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
std::shared_ptr<TensorImpl<T>> make_output(const char* op, OpInputs<T> inputs, Array<T>&& value) {
  if (g_anomaly && !all_finite(value)) {
    // An op fed a NaN is not where it came from: name the input (a leaf, or a value made
    // before the guard was on) rather than blame the op.
    std::size_t i = 0;
    for (const Tensor<T>& in : inputs) {
      if (const char* kind = nonfinite_kind(std::as_const(in).value()))
        throw AnomalyError(fmt::format(
            "anomaly: input {} of {} already holds {} (so {} did not produce it): inputs {} -> {}",
            i, op, kind, op, input_shapes(inputs), shape_str(shape_of(value))));
      ++i;
    }
    throw AnomalyError(fmt::format("anomaly: {} produced a non-finite value: inputs {} -> {}", op,
                                   input_shapes(inputs), shape_str(shape_of(value))));
  }
  return std::make_shared<TensorImpl<T>>(std::move(value));
}

template <class T>
void push_node(const char* op, OpInputs<T> inputs, const std::shared_ptr<TensorImpl<T>>& out,
               BackwardFn<T> backward) {
  Tape<T>& tape = Tape<T>::active();
  out->requires_grad = true;
  out->is_leaf = false;
  out->history = History::recorded;
  out->op = op;
  out->tape = &tape;
  Node<T> node;
  node.op = op;
  node.inputs.reserve(inputs.size());
  for (const Tensor<T>& in : inputs) node.inputs.emplace_back(in.impl());
  node.output = out;
  node.out = out.get();
  node.output_version = out->version;
  node.precision = kernels::matmul_precision();
  out->saves.fetch_add(1, std::memory_order_relaxed);
  node.output_shape = out->shape();
  node.backward = std::move(backward);
  tape.push(std::move(node));
}

}  // namespace detail

#define TAPEGRAD_INSTANTIATE(T)                                                          \
  template bool will_record(OpInputs<T>);                                                \
  template std::shared_ptr<TensorImpl<T>> detail::make_output(const char*, OpInputs<T>,   \
                                                              Array<T>&&);               \
  template void detail::push_node(const char*, OpInputs<T>,                              \
                                  const std::shared_ptr<TensorImpl<T>>&, BackwardFn<T>); \
  template class BackwardContext<T>;                                                     \
  template struct SavedInput<T>;                                                         \
  template class Tape<T>;                                                                \
  template class TapeScope<T>;
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad
