#pragma once
// The engine and every op in one include: Tensor, the tape and backward, NoGradGuard,
// AnomalyGuard, gradcheck, the ops, and set_num_threads. The modules, optimisers, the
// transformer and checkpoints (nn/) come with tapegrad_nn.hpp.
#include <xtensor/xarray.hpp>

#include "autograd/checkpoint.hpp"
#include "autograd/errors.hpp"
#include "autograd/gradcheck.hpp"
#include "autograd/memory.hpp"
#include "autograd/shape.hpp"
#include "autograd/tape.hpp"
#include "autograd/tensor.hpp"
#include "ops/attention.hpp"
#include "ops/attention_decode.hpp"
#include "ops/attention_flash.hpp"
#include "ops/attention_fused.hpp"
#include "ops/attention_spec.hpp"
#include "ops/cross_entropy.hpp"
#include "ops/elementwise.hpp"
#include "ops/embedding.hpp"
#include "ops/linear_cross_entropy.hpp"
#include "ops/matmul.hpp"
#include "ops/norm.hpp"
#include "ops/precision.hpp"
#include "ops/reduce.hpp"
#include "ops/rope.hpp"
#include "ops/shape_ops.hpp"
#include "ops/softmax.hpp"
#include "ops/threads.hpp"
