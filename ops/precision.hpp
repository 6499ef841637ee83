#pragma once
// bf16 matrix products, as users set them: MatmulPrecisionGuard bf16(MatmulPrecision::bf16)
// for a scope; platform/execution.hpp says what is rounded and what stays float32.
#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/kernels/gemm_bf16.hpp"  // to_bf16, from_bf16
#include "platform/execution.hpp"

namespace tapegrad {

using kernels::matmul_precision;
using kernels::MatmulPrecision;
using kernels::MatmulPrecisionGuard;
using kernels::set_matmul_precision;
using kernels::from_bf16;
using kernels::to_bf16;

// "f32" and "bf16", in the order of the enum: the names --precision and metrics.json use,
// and (by index) a training checkpoint.
inline const std::vector<std::string>& matmul_precision_names() {
  static const std::vector<std::string> names = {"f32", "bf16"};
  return names;
}
inline const std::string& matmul_precision_name(MatmulPrecision precision) {
  return matmul_precision_names().at(static_cast<std::size_t>(precision));
}
// std::invalid_argument naming the known names for another name.
inline MatmulPrecision matmul_precision_from_name(const std::string& name) {
  const std::vector<std::string>& names = matmul_precision_names();
  const auto it = std::find(names.begin(), names.end(), name);
  if (it == names.end())
    throw std::invalid_argument("matmul precision '" + name + "' is not f32 or bf16");
  return static_cast<MatmulPrecision>(it - names.begin());
}

}  // namespace tapegrad
