#include "ops/threads.hpp"

#include "ops/kernels/parallel.hpp"

namespace tapegrad {

void set_num_threads(int threads) { kernels::set_num_threads(threads); }
int num_threads() { return kernels::num_threads(); }

}  // namespace tapegrad
