#pragma once
// Everything a user of tapegrad's engine and ops needs, in one include.
#include <xtensor/xarray.hpp>

#include "autograd/gradcheck.hpp"
#include "autograd/memory.hpp"
#include "autograd/tape.hpp"
#include "autograd/tensor.hpp"
#include "ops/attention.hpp"
#include "ops/attention_fused.hpp"
#include "ops/attention_spec.hpp"
#include "ops/cross_entropy.hpp"
#include "ops/elementwise.hpp"
#include "ops/embedding.hpp"
#include "ops/kernels/gemm.hpp"  // kernels::set_num_threads
#include "ops/matmul.hpp"
#include "ops/norm.hpp"
#include "ops/reduce.hpp"
#include "ops/rope.hpp"
#include "ops/shape_ops.hpp"
#include "ops/softmax.hpp"
