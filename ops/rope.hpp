#pragma once
// Rotary position embeddings (RoPE) and the context-extension scalings of Hugging Face's
// modeling_rope_utils. Pair i of a head (of head_dim = 2h values) at absolute position p is
// rotated by the angle p * inv_freq[i]; the angle is formed in double whatever T is, since
// at p ~ 1e5 a float angle is already off by ~1e-2 radians.
//
// Two pairings are in use and are NOT interchangeable (weights trained with one give wrong
// attention under the other, silently):
//   half         HF / GPT-NeoX rotate_half: pairs (i, i + h)   -- the default
//   interleaved  Meta / GPT-J / llm.c:      pairs (2i, 2i + 1)
#include <cstddef>
#include <string>
#include <vector>

#include "autograd/tensor.hpp"

namespace tapegrad {

enum class RopeStyle { half, interleaved };
enum class RopeScaling { none, linear, ntk, llama3, yarn };

struct RopeSpec {
  double theta = 10000.0;
  RopeStyle style = RopeStyle::half;
  RopeScaling scaling = RopeScaling::none;
  double factor = 1.0;               // linear, ntk (alpha), llama3, yarn
  double low_freq_factor = 1.0;      // llama3
  double high_freq_factor = 4.0;     // llama3
  std::size_t original_context = 0;  // llama3, yarn: original_max_position_embeddings
  double beta_fast = 32.0, beta_slow = 1.0;  // yarn
};

std::string to_string(RopeStyle style);
std::string to_string(RopeScaling scaling);
// "half" | "interleaved"; ShapeError naming the value otherwise.
RopeStyle parse_rope_style(const std::string& name);
// "none" | "linear" | "ntk" | "llama3" | "yarn"; ShapeError naming the value otherwise.
RopeScaling parse_rope_scaling(const std::string& name);

// Throws ShapeError "op: ..." naming the bad field: odd or zero head_dim, theta <= 0 or not
// finite, factor <= 0 or not finite (for the scalings that use it), ntk with head_dim 2,
// llama3 with original_context 0 or high_freq_factor <= low_freq_factor (or
// low_freq_factor <= 0), yarn with original_context 0, theta 1 or a beta <= 0.
void check_rope_spec(const char* op, std::size_t head_dim, const RopeSpec& spec);

struct RopeFrequencies {
  std::vector<double> inv_freq;   // head_dim / 2 entries
  double attention_factor = 1.0;  // multiplies cos and sin (yarn); 1 otherwise
};
RopeFrequencies rope_frequencies(std::size_t head_dim, const RopeSpec& spec);

// x (..., T, head_dim), rank >= 2 -> the same shape: row t is at absolute position
// offset + t (offset = the number of tokens already cached when decoding).
template <class T>
Tensor<T> rope(const Tensor<T>& x, std::size_t offset, const RopeSpec& spec);

// x (B, T, heads * head_dim), a projection before it is split into heads -> the same shape:
// each head's column block of row t is rotated at position offset + t, in place of
// reshape + transpose + rope + transpose + reshape (no copies).
template <class T>
Tensor<T> rope_heads(const Tensor<T>& x, std::size_t heads, std::size_t offset,
                     const RopeSpec& spec);

}  // namespace tapegrad
