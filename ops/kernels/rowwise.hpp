#pragma once
// Vectorised loops over one contiguous row (xsimd): the inner loops of softmax, of cross
// entropy and of the fused attention kernels. All of them exponentiate the same way: xsimd's
// exp over whole vectors, std::exp's own numbers over the tail shorter than one vector.
#include <cstddef>
#include <limits>

namespace tapegrad::kernels {

// Subnormal numbers slow every product that meets them many times over (each takes a
// microcode assist), and a bias such as ALiBi's makes them common in attention: the weights
// of far keys are tiny, and so are their products with the values, with (dp - D), with q
// and k. The attention kernels therefore store weights (and flash's ds and rescaled output)
// below kTinyWeight, 2^62 times the smallest normal number (2^-64 in float), as 0, so that
// their products with anything above 2^-62 in magnitude stay normal: a row's weights sum to
// 1, and what is dropped is below 2^-64 of it per key.
template <class T>
constexpr T kTinyWeight = std::numeric_limits<T>::min() * T(4611686018427387904.0);  // 2^62

// In place: row <- softmax(row) over L elements. Entries equal to -inf (masked) get weight
// exactly 0 while the row has a finite maximum. As plain softmax, a row with a NaN or +inf,
// or entirely -inf, becomes NaN: a row the caller masked entirely is the caller's to zero
// (it knows from the mask, the values cannot tell a masked key from a score of -inf). With
// a floor (kTinyWeight), entries whose exp(x - max) is below it become 0.
template <class T>
void softmax_row_inplace(T* row, std::size_t L, T floor = T(0));

// The same for `count` rows, row r starting at rows + r * stride and softmaxed over its
// first lengths[r] elements (the rest is not touched). The results are those of
// softmax_row_inplace row by row; rows of up to 64 elements are processed
// softmax_row_group(stride) = kMaxSoftmaxRowGroup at a time, interleaved, which is faster.
inline constexpr std::size_t kMaxSoftmaxRowGroup = 16;
std::size_t softmax_row_group(std::size_t row_length);  // 1 or kMaxSoftmaxRowGroup
template <class T>
void softmax_rows_inplace(T* rows, std::size_t count, std::size_t stride,
                          const std::size_t* lengths, T floor = T(0));

// The largest of row[0..L), -inf if L = 0; a nan is never taken, as in `x > m ? x : m`.
template <class T>
T row_max(const T* row, std::size_t L);

// row[k] <- exp(row[k] - shift) for k < L, stored as 0 where below `floor` (0: none); returns
// their sum before the floor (the vector part's, then the tail's from left to right).
template <class T>
T exp_shifted_inplace(T* row, std::size_t L, T shift, T floor = T(0));

// log(sum(exp(row))) over L >= 1 elements, computed as m + log(sum(exp(row - m))) with m the
// row max, so that no exponent is positive and nothing overflows. The row is only read.
template <class T>
T logsumexp_row(const T* row, std::size_t L);

// out = exp(row - lse) * scale over L elements: softmax(row) * scale when
// lse = logsumexp_row(row, L). out may be row.
template <class T>
void softmax_row_from_lse(const T* row, std::size_t L, T lse, T scale, T* out);

// dx = y * (dy - sum(dy * y)) * scale over one row of L (dx may alias dy).
template <class T>
void softmax_backward_row(const T* y, const T* dy, T* dx, std::size_t L, T scale);

// row[k] <- cap * tanh(row[k] / cap) for k < L (cap > 0): the logit soft-cap; with `kept`,
// stored there too in the same pass (the copy a backward keeps). xsimd's tanh over whole
// vectors, the tail padded to one more.
template <class T>
void softcap_inplace(T* row, std::size_t L, T cap, T* kept = nullptr);

// row[k] -= slope * (distance - k) for k < L: a bias linear in the key's position, the key
// at row[0] `distance` positions before the query (ALiBi). The distances are whole numbers,
// exact in T below 2^24 (float).
template <class T>
void subtract_linear_bias(T* row, std::size_t L, T slope, T distance);

// Its backward from its output: ds[k] *= 1 - (capped[k] / cap)^2, which is 1 - tanh^2 of
// the score before the cap.
template <class T>
void softcap_backward_inplace(const T* capped, T* ds, std::size_t L, T cap);

// The same from the scores before the cap, for a backward that recomputes them rather than
// keep the capped ones: ds[k] *= 1 - tanh^2(scores[k] / cap), in one pass with the tanh.
template <class T>
void softcap_backward_from_scores(const T* scores, T* ds, std::size_t L, T cap);

}  // namespace tapegrad::kernels
