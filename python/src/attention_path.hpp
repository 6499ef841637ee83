#pragma once
// The Python spelling of an AttentionPath ("fused", "composed", "flash"), shared by the
// attention op and Transformer.set_attention_path so both accept and refuse the same names.
#include <string>

#include "autograd/errors.hpp"
#include "ops/attention.hpp"

namespace tapegrad::python {

inline AttentionPath attention_path_of(const char* op, const std::string& name) {
  if (name == "fused") return AttentionPath::fused;
  if (name == "composed") return AttentionPath::composed;
  if (name == "flash") return AttentionPath::flash;
  fail(op, "path must be 'fused', 'composed' or 'flash', not '{}'", name);
}

}  // namespace tapegrad::python
