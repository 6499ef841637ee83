#pragma once
// FlashAttention on the CPU (FlashAttention-2's algorithm), forward and exact backward, for
// the same HeadLayout as the fused kernels (ops/kernels/attention.hpp): heads read in place,
// a shared kv head read by every query head of its group, the layout's causal / window band
// bottom-right aligned. No (Tq, Tk) matrix is ever formed: work proceeds over one block of
// kFlashQueryBlock queries against one block of kFlashKeyBlock keys at a time, so memory is
// linear in the sequence length.
//
// Block sizes: 64 queries x 128 keys. One block pair's scores and their gradient are
// 2 * 64 * 128 doubles = 128 KiB; with the Q, K, V and dO blocks (head_dim 32) about 224 KiB,
// inside this machine's 512 KiB of L2 per core even in double. 128 keys amortise the online
// softmax's per-row rescaling of the output; 64 queries keep a causal diagonal block's wasted
// (masked) half small and leave enough query blocks to spread over the threads.
//
// Key blocks sit on a fixed grid [kb * 128, (kb + 1) * 128); each block pair is cut to the
// keys its query rows' band reaches (a causal diagonal pair computes about half a block), and
// a pair none of whose entries is visible is skipped. Every task writes its own memory and sums in a fixed order,
// so results are bitwise identical at any thread count.
#include <cstddef>

#include "ops/kernels/attention.hpp"  // HeadLayout

namespace tapegrad::kernels {

inline constexpr std::size_t kFlashQueryBlock = 64;
inline constexpr std::size_t kFlashKeyBlock = 128;

// y (B, Tq, H*dv) = softmax(scale * q_h k_kv^T on the band) v_kv per head, merged;
// lse (B, H, Tq) = the log of each row's softmax denominator including its max
// (log sum_j exp(scale q_i . k_j) over the visible keys), -inf for a row that sees no key,
// whose output is 0.
template <class T>
void flash_attention_forward(const HeadLayout& L, const T* q, const T* k, const T* v, T scale,
                             T* y, T* lse);

// Given the forward's y and lse and dy = d(loss)/dy: dq, dk, dv (shapes of q, k, v),
// overwritten; any of them may be null when not wanted. P = exp(scale q k^T - lse) is
// recomputed block by block; D = rowsum(dy * y); dS = P * (dy v^T - D);
// dq = scale dS k, dk = scale dS^T q, dv = P^T dy (summed over a kv head's group).
// One pass over the block pairs when there are enough (batch item, kv head) tasks for the
// threads (each task owns its kv head's dk, dv and its query heads' dq), else two passes
// that recompute P and dS (one owning rows of dk and dv, one rows of dq); both sum in the
// same order, so the bits do not depend on which runs.
template <class T>
void flash_attention_backward(const HeadLayout& L, const T* q, const T* k, const T* v,
                              const T* y, const T* lse, const T* dy, T scale, T* dq, T* dk,
                              T* dv);

}  // namespace tapegrad::kernels
