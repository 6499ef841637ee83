#pragma once
// Vectorised loops over one contiguous row (xsimd): the inner loops of softmax and of the
// fused attention kernels.
#include <cstddef>

namespace tapegrad::kernels {

// In place: row <- softmax(row) over L elements. Entries equal to -inf (masked) get weight
// exactly 0; a row that is entirely -inf becomes all zeros instead of 0/0.
template <class T>
void softmax_row_inplace(T* row, std::size_t L);

// dx = y * (dy - sum(dy * y)) * scale over one row of L (dx may alias dy).
template <class T>
void softmax_backward_row(const T* y, const T* dy, T* dx, std::size_t L, T scale);

}  // namespace tapegrad::kernels
