#pragma once
// Activation checkpointing: y = f(x) on the tape as one node that keeps x (and f), not the
// intermediates f computes; its backward runs f again on x and back-propagates through that
// run. A model of L checkpointed blocks keeps L block inputs through the forward, and one
// block's intermediates at a time.
#include <functional>
#include <vector>

#include "autograd/tensor.hpp"

namespace tapegrad {

template <class T>
using CheckpointedFunction = std::function<Tensor<T>(const Tensor<T>&)>;

// y = f(x), recorded as the node "checkpoint" with inputs x and `parameters` (the leaves f
// reads: the node is recorded when one of them requires grad, and a parameter edited in
// place before the backward is a GraphError, as for any op).
// Forward: f runs on a TapeScope of its own (recording, so that it computes exactly what it
// computes under any other forward that records), whose nodes and intermediates are dropped
// as soon as y is known. Backward: f runs again on a fresh TapeScope, on a leaf holding x's
// value, and dy goes back through that run there: the parameters receive their gradients
// from it directly, x its own through the node. The same gradients as f recorded in place,
// bit for bit, when f computes the same numbers each time it runs on the same x.
// f must read no tensor with history but x (a tensor recorded on another tape cannot be
// reached from the scope's backward: GraphError), nothing random, and nothing that changes
// between the forward and the backward (hooks, a mask set in between: not checked).
// Without grad, or with nothing requiring it, this is f(x).
template <class T>
Tensor<T> checkpoint(const Tensor<T>& x, const std::vector<Tensor<T>>& parameters,
                     CheckpointedFunction<T> f);

extern template Tensor<float> checkpoint(const Tensor<float>&, const std::vector<Tensor<float>>&,
                                         CheckpointedFunction<float>);
extern template Tensor<double> checkpoint(const Tensor<double>&, const std::vector<Tensor<double>>&,
                                          CheckpointedFunction<double>);

}  // namespace tapegrad
