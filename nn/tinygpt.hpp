#pragma once
// TinyGPT is the name tapegrad's model had while it could only be GPT-2: it is the
// Transformer of nn/transformer.hpp, and TinyGPTConfig its TransformerConfig. The default
// configuration (the gpt2 preset) is that model exactly, so code written for TinyGPT
// keeps building and training the same model, bit for bit.
#include "nn/transformer.hpp"

namespace tapegrad {

using TinyGPTConfig = TransformerConfig;
template <class T>
using TinyGPT = Transformer<T>;

}  // namespace tapegrad
