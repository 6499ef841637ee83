#pragma once
// TinyGPT was the name of tapegrad's model while it could only be GPT-2; it is now
// Transformer (nn/transformer.hpp). These aliases keep code written against the old name
// building, with a deprecation warning; they go in the next release.
#include "nn/transformer.hpp"

namespace tapegrad {

using TinyGPTConfig [[deprecated("use TransformerConfig")]] = TransformerConfig;
template <class T>
using TinyGPT [[deprecated("use Transformer<T>")]] = Transformer<T>;

}  // namespace tapegrad
