#pragma once
// The checks every program that loads a model makes before using it: weights that hold NaN
// or Inf are refused (exit 2, naming the tensor and the element) unless --allow-nonfinite
// is given, so that no program answers plausibly from a model another refuses.
#include <string>

#include <CLI/CLI.hpp>

#include "nn/module.hpp"

namespace tapegrad::apps {

// --allow-nonfinite, with the one help text every program shows.
void add_allow_nonfinite_option(CLI::App& app, bool& allow, const std::string& group = "");

// UsageError "<label>: parameter 'name' (shape) holds nan at element i (--allow-nonfinite
// loads it anyway)" for the first non-finite value; nothing when `allow`.
void require_finite_parameters(const Module<float>& model, const std::string& label, bool allow);

}  // namespace tapegrad::apps
