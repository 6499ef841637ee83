#pragma once
// A language model's head and its loss as one op, computed a chunk of rows at a time, so
// that the (N, V) logits never exist at once (GPT-2's V = 50,257: 200 KB of float32 logits
// per position, 823 MB for a batch of 4 x 1024): cross_entropy([softcap](h @ W), targets).
#include <cstddef>
#include <cstdint>

#include "autograd/tensor.hpp"
#include "ops/embedding.hpp"  // Indices

namespace tapegrad {

struct LinearCrossEntropyOptions {
  // weight is (V, d) and the head h @ weight^T: a head tied to the token embedding's matrix
  bool transposed = false;
  // c > 0: the logits are capped as the softcap op caps them, c * tanh(l / c), before the
  // loss (a model's final_softcap); 0: none
  double softcap = 0;
  std::int64_t ignore_index = -100;
  // rows of logits computed at once (0: default_chunk_rows), rounded up to a multiple of 16
  std::size_t chunk_rows = 0;
};

// h (..., d), weight (d, V) (or (V, d) when transposed), targets h's shape without its last
// axis, each in [0, V) or ignore_index -> scalar: the mean over the kept rows of
// -log softmax(logits)[target], logits = h @ weight [-> softcap]; every row ignored: 0 with a
// zero gradient. The numbers of cross_entropy(softcap(matmul(h, weight)), targets): the same
// row kernels, the loss summed over the rows in order; each chunk's products are parts of
// the whole products, so under kernels::ReferenceProductsGuard (a product's numbers
// independent of its shape) loss and gradients equal the unchunked ops' bit for bit, and
// with BLAS to its rounding. Never more than chunk_rows x V logits exist at once.
// When the loss will be differentiated (grad mode on, h or weight requiring grad), the
// forward also takes each chunk's gradient while its logits are at hand (the head's products
// then cost 3 times the forward's, as unchunked, not 4) and keeps dh and dW, the size of h
// and weight, for the backward, which multiplies them by the loss's gradient g: bit for bit
// the unchunked ops' when g is 1 or a power of two, to rounding otherwise. A second
// backward through a retained graph computes the chunks' logits again. Evaluate under a
// NoGradGuard: a loss that is never differentiated then costs the forward's products only.
// ShapeError for shapes that do not fit, a target outside [0, V) that is not ignore_index,
// or a softcap outside [kMinSoftcap, kMaxSoftcap].
template <class T>
Tensor<T> linear_cross_entropy(const Tensor<T>& h, const Tensor<T>& weight, const Indices& targets,
                               const LinearCrossEntropyOptions& options = {});

// The rows of a chunk when none is asked for: 32 MiB of logits of type T, at least 256 rows
// (each chunk adds its part of the weight's gradient into the whole (d, V) array: fewer,
// longer chunks read and write it fewer times), a multiple of 16.
std::size_t default_chunk_rows(std::size_t vocab, std::size_t bytes_per_value);

}  // namespace tapegrad
