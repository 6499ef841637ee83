#pragma once
// The calling thread's execution settings: how its matrix products are computed. They sit
// at the bottom, below both the tape (autograd/tape.hpp keeps, on every node, the precision
// its op ran at) and the kernels (ops/kernels/dispatch.cpp reads them for every product);
// the kernels' pool threads (ops/kernels/parallel.cpp) take the caller's settings, as one
// ThreadSettings, for the work they do on its behalf. Users set them through
// ops/precision.hpp. They keep the kernels' namespace they had in ops/kernels/precision.hpp.
//
// The precision of float32 matrix products: f32 (the default) or bf16, where every float32
// product that goes through kernels::gemm* (projections, the MLP, the head, attention's score
// and value products, forward and backward) rounds its operands to bf16 and sums in float32
// (the kernel chosen by ops/kernels/dispatch.hpp). Everything else (softmax, norms, RoPE, the
// loss, reductions, the optimiser, the weights themselves) stays float32; float64 products
// are never rounded.
//
// The setting belongs to the calling thread, and the kernels' pool threads take the caller's
// setting for the work they do on its behalf: two threads may train at two precisions.
// A backward runs each node's products at the precision its op ran at, whatever the setting
// when backward() is called (PyTorch's autocast does the same): a bf16 forward followed by a
// backward outside the guard gets bf16's gradients, an f32 forward f32's inside one.
#include <cstdint>

namespace tapegrad::kernels {

// A byte: every node of the tape keeps the one its op ran at (autograd/tape.hpp).
enum class MatmulPrecision : std::uint8_t { f32, bf16 };

MatmulPrecision matmul_precision();
// Setting bf16 calls the bf16 notice (set_bf16_notice, below) first, if one is set.
void set_matmul_precision(MatmulPrecision precision);

// Sets the calling thread's precision for a scope and restores the previous one:
//   { MatmulPrecisionGuard bf16(MatmulPrecision::bf16); loss = model.loss(batch); loss.backward(); }
class MatmulPrecisionGuard {
 public:
  explicit MatmulPrecisionGuard(MatmulPrecision precision) : previous_(matmul_precision()) {
    set_matmul_precision(precision);
  }
  ~MatmulPrecisionGuard() { set_matmul_precision(previous_); }
  MatmulPrecisionGuard(const MatmulPrecisionGuard&) = delete;
  MatmulPrecisionGuard& operator=(const MatmulPrecisionGuard&) = delete;

 private:
  MatmulPrecision previous_;
};

// Reference products, for tests that hold two ways of splitting one computation equal bit
// for bit. While on (the calling thread's setting, which the pool threads take for its work
// as they take the precision), every product that goes through kernels::gemm* runs
// dispatch.hpp's reference kernel: each number of C is one chain of fused multiply-adds over
// k = 0, 1, ..., K - 1 in order, so it does not depend on the product's shape, on the block
// of C it is computed in or on the thread count, as BLAS's numbers do (OpenBLAS picks its
// kernels, and so the order of its sums, by the shape). Slow: for small tests only. Both
// float and double; a bf16 precision is ignored while it is on.
bool reference_products();
void set_reference_products(bool on);
class ReferenceProductsGuard {
 public:
  ReferenceProductsGuard() : previous_(reference_products()) { set_reference_products(true); }
  ~ReferenceProductsGuard() { set_reference_products(previous_); }
  ReferenceProductsGuard(const ReferenceProductsGuard&) = delete;
  ReferenceProductsGuard& operator=(const ReferenceProductsGuard&) = delete;

 private:
  bool previous_;
};

// All of the calling thread's settings at once: what a pool thread takes from the caller
// for the work it does on the caller's behalf, and gives back after. set_thread_settings
// sets them as they are (no notice).
struct ThreadSettings {
  MatmulPrecision precision = MatmulPrecision::f32;
  bool reference = false;
};
ThreadSettings thread_settings();
void set_thread_settings(const ThreadSettings& settings);

// What set_matmul_precision(bf16) calls first: the kernels set it (ops/kernels/dispatch.cpp)
// to warn, once, where no faster bf16 instruction is used. Null (the default): nothing.
// Returns the notice it replaces.
using Bf16Notice = void (*)();
Bf16Notice set_bf16_notice(Bf16Notice notice);

}  // namespace tapegrad::kernels
