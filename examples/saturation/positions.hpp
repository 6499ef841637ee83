#pragma once
// Position, checked in float64 with tapegrad's own ops:
// - attention without positions is permutation-equivariant: shuffling the tokens shuffles
//   the output rows and changes nothing else (the gap is round-off);
// - a learned vector added per slot breaks that (the gap is of the order of the values);
// - with RoPE the scores depend only on the distance between query and key: shifting every
//   position by a constant leaves them unchanged (round-off), while absolute learned
//   vectors do not survive the shift;
// - the residual stream over 32 random tanh layers, with and without residuals (RMSNorm on
//   each layer's input): cosine to the input and norm.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace tapegrad::saturation {

struct ResidualRow {
  std::size_t layer = 0;
  double plain_cos = 0, plain_norm = 0;        // h = tanh(h A)
  double residual_cos = 0, residual_norm = 0;  // h = h + tanh(rms_norm(h) A)
};

struct PositionResults {
  double no_position_gap = 0;    // max |attn(X)[perm] - attn(X[perm])|
  double learned_gap = 0;        // the same with X + P (P one vector per slot)
  double rope_shift_gap = 0;     // max |scores at positions p - scores at p + shift|
  double learned_shift_gap = 0;  // the same with learned vectors instead of RoPE
  double input_norm = 0;         // |h0| of the residual table
  std::vector<ResidualRow> residual;  // layers 1, 2, 4, 8, 16, 32
};

PositionResults run_position_checks(std::uint64_t seed = 1);

}  // namespace tapegrad::saturation
