#pragma once
// Finite-difference check of any function of tensors.
//
// The function's output y (any shape) is reduced to the scalar L = sum(y * R) with a
// fixed random R, so one backward pass gives dL/dx for every input; each checked element
// is compared with the central difference (L(x + eps) - L(x - eps)) / (2 eps).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "autograd/tensor.hpp"

namespace tapegrad {

struct GradcheckOptions {
  double eps = 1e-6;   // double precision defaults, as PyTorch's gradcheck
  double atol = 1e-5;
  double rtol = 1e-3;
  std::size_t max_elements = 0;  // per input; 0 checks every element, else a seeded sample
  std::uint64_t seed = 0;
  // Defaults suitable for float32 spot checks: float's 7 digits force a larger step.
  static GradcheckOptions for_float() { return GradcheckOptions{1e-2, 1e-2, 5e-2, 0, 0}; }
};

struct InputCheck {
  Shape shape;
  std::size_t checked = 0;       // elements compared
  double max_abs_error = 0.0;    // max |analytic - numeric|
  // max |analytic - numeric| / max |numeric|: the error relative to the largest gradient
  // of this input (element-wise ratios explode where the true gradient is ~0)
  double max_rel_error = 0.0;
  bool passed = true;            // every element: |a - n| <= atol + rtol |n|
};

struct GradcheckResult {
  std::vector<InputCheck> inputs;
  bool passed = true;
  bool in_float = false;          // checked in float32, whose differences are coarse
  // one line per input; a failure in float32 adds a line saying to check in float64
  std::string to_string() const;
};

template <class T>
using TensorFunction = std::function<Tensor<T>(const std::vector<Tensor<T>>&)>;

// Checks d f / d inputs[i] for every input that requires grad. Inputs are perturbed in
// place and restored; the tape is left empty.
template <class T>
GradcheckResult gradcheck(const TensorFunction<T>& f, const std::vector<Tensor<T>>& inputs,
                          GradcheckOptions options = {});

extern template GradcheckResult gradcheck(const TensorFunction<float>&,
                                          const std::vector<Tensor<float>>&, GradcheckOptions);
extern template GradcheckResult gradcheck(const TensorFunction<double>&,
                                          const std::vector<Tensor<double>>&, GradcheckOptions);

}  // namespace tapegrad
