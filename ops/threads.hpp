#pragma once
// The thread count of tapegrad's kernels, as programs and users set it. (The pool behind it,
// and why OpenBLAS stays single-threaded, is ops/kernels/parallel.hpp.)
namespace tapegrad {

// Threads for attention (over heads and batch), large gemms (over row or column blocks)
// and long elementwise kernels; 0 means all cores. The default is 1, which is fastest for
// small models. Results do not depend on it.
void set_num_threads(int threads);
int num_threads();

}  // namespace tapegrad
