#pragma once
// The one check of weights for NaN and Inf. A single non-finite weight makes every logit
// NaN, so a model that holds one is refused where it is loaded, by the same rule and in the
// same words everywhere: the programs (--allow-nonfinite), Python's load_checkpoint and
// Model.load (allow_nonfinite) and load_pretrained (which checks each tensor as it reads
// it). Each caller adds only its error type and its own way out.
#include <cstddef>
#include <string>
#include <vector>

#include "nn/io/npz.hpp"
#include "nn/module.hpp"

namespace tapegrad {

// "'name' (2,3) holds nan at element 4" for the first NaN or Inf among a tensor's `count`
// values; empty when all are finite.
template <class T>
std::string nonfinite_value(const std::string& name, const std::string& shape, const T* values,
                            std::size_t count);

// "parameter 'name' (2,3) holds nan at element 4 (<way_out> loads it anyway)" for the first
// parameter that holds NaN or Inf; empty when every one is finite. Of a built model, or of a
// checkpoint's entries before anything is built from them (its __config__ and __train__
// entries are not weights and are passed over).
template <class T>
std::string nonfinite_parameter(const Module<T>& model, const std::string& way_out);
std::string nonfinite_parameter(const std::vector<NpzEntry>& checkpoint, const std::string& way_out);

#define TAPEGRAD_FINITE_WEIGHTS_EXTERN(T)                                                   \
  extern template std::string nonfinite_value(const std::string&, const std::string&,     \
                                              const T*, std::size_t);                     \
  extern template std::string nonfinite_parameter(const Module<T>&, const std::string&);
TAPEGRAD_FINITE_WEIGHTS_EXTERN(float)
TAPEGRAD_FINITE_WEIGHTS_EXTERN(double)
#undef TAPEGRAD_FINITE_WEIGHTS_EXTERN

}  // namespace tapegrad
