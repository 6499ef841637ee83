#pragma once
// softmax, log_softmax and masked_softmax along one axis, numerically stable.
#include <xtensor/xtensor_forward.hpp>

#include "autograd/tensor.hpp"

namespace tapegrad {

// A boolean mask: true where a query may attend to a key.
using Mask = xt::xarray<bool>;

template <class T> Tensor<T> softmax(const Tensor<T>& x, long axis = -1);
template <class T> Tensor<T> log_softmax(const Tensor<T>& x, long axis = -1);
// softmax along the last axis with disallowed scores set to -inf before the exponential.
// mask broadcasts to x's shape. A row with nothing allowed gives zeros and zero gradient.
template <class T> Tensor<T> masked_softmax(const Tensor<T>& x, const Mask& mask);

}  // namespace tapegrad
