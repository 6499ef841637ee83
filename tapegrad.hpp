#pragma once
// Everything a user of tapegrad needs, in one include.
#include <xtensor/xarray.hpp>

#include "autograd/gradcheck.hpp"
#include "autograd/memory.hpp"
#include "autograd/tape.hpp"
#include "autograd/tensor.hpp"
#include "ops/elementwise.hpp"
#include "ops/matmul.hpp"
#include "ops/reduce.hpp"
#include "ops/shape_ops.hpp"
#include "ops/softmax.hpp"
