#pragma once
// Vectorised loops over one contiguous row (xsimd): the inner loops of softmax and of the
// fused attention kernels.
#include <cstddef>

namespace tapegrad::kernels {

// In place: row <- softmax(row) over L elements. Entries equal to -inf (masked) get weight
// exactly 0; a row that is entirely -inf becomes all zeros instead of 0/0.
template <class T>
void softmax_row_inplace(T* row, std::size_t L);

// The same for `count` rows, row r starting at rows + r * stride and softmaxed over its
// first lengths[r] elements (the rest is not touched). The results are those of
// softmax_row_inplace row by row; rows of up to 64 elements are processed
// softmax_row_group(stride) = kMaxSoftmaxRowGroup at a time, interleaved, which is faster.
inline constexpr std::size_t kMaxSoftmaxRowGroup = 16;
std::size_t softmax_row_group(std::size_t row_length);  // 1 or kMaxSoftmaxRowGroup
template <class T>
void softmax_rows_inplace(T* rows, std::size_t count, std::size_t stride,
                          const std::size_t* lengths);

// dx = y * (dy - sum(dy * y)) * scale over one row of L (dx may alias dy).
template <class T>
void softmax_backward_row(const T* y, const T* dy, T* dx, std::size_t L, T scale);

}  // namespace tapegrad::kernels
