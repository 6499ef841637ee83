#pragma once
// Every differentiable op, registered once: its name (the C++ and the Python name), how many
// tensors it differentiates, and its finite-difference cases in double. examples/gradcheck
// prints one row per case; tests/test_op_registry.cpp runs every case and fails when an op
// lacks a case, a Python binding (python/src/) or its place in docs/ARCHITECTURE.md's list.
#include <cstddef>
#include <string>
#include <vector>

#include "autograd/gradcheck.hpp"
#include "autograd/shape.hpp"
#include "autograd/tensor.hpp"

namespace tapegrad {

// Where a case's random inputs are drawn: anywhere, in [0.5, 2] (log, sqrt, a divisor), or
// away from 0 (relu's kink is not differentiable).
enum class InputDomain { any, positive, away_from_zero };

struct GradcheckCase {
  std::string label;          // the gradcheck table's row: "add (broadcast)"
  std::vector<Shape> shapes;  // one per differentiated input
  InputDomain domain = InputDomain::any;
  TensorFunction<double> f;
};

struct RegisteredOp {
  std::string name;
  // The tensors the op differentiates (add: 2, layer_norm: 3); 0 for a list of any length
  // (concatenate). A case may take fewer (add with a scalar).
  std::size_t arity;
  std::vector<GradcheckCase> cases;
};

const std::vector<RegisteredOp>& op_registry();

// A case's inputs, drawn from `gen` in its domain, each requiring grad.
std::vector<Tensor<double>> gradcheck_inputs(const GradcheckCase& c, Generator& gen);

}  // namespace tapegrad
