#pragma once
// The query gradient's product dq = ds @ k of the fused and flash kernels, over the keys
// each query row sees. A row's ds is 0 on the keys it does not see, but 0 x NaN is NaN: a
// key that holds a NaN or an infinity must not reach the dq of a row that does not see it.
#include <cstddef>

#include "ops/kernels/attention_rule.hpp"
#include "ops/kernels/gemm_small.hpp"  // Triangle

namespace tapegrad::kernels {

// dq[r] (+)= alpha * ds[r] @ k over the keys [j0, j0 + n), for the query rows r of
// [r0, r0 + rows): ds (rows, n) with row stride ldds, k's rows from j0 with stride ldk, dq's
// rows from r0 with stride lddq, each dh wide; beta 0 overwrites dq, 1 adds to it. When the
// n key rows are finite, one product (skipping `structure`'s zeros): the zeros of ds add
// exact zeros. Otherwise each row reads only its own visible keys.
template <class T>
void visible_keys_product(const AttentionRule& rule, std::size_t r0, std::size_t rows,
                          std::size_t j0, std::size_t n, std::size_t dh, T alpha, const T* ds,
                          std::size_t ldds, const T* k, std::size_t ldk, T beta, T* dq,
                          std::size_t lddq, Triangle structure = Triangle::none);

}  // namespace tapegrad::kernels
