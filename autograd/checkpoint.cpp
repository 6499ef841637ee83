#include "autograd/checkpoint.hpp"

#include <utility>

#include "autograd/tape.hpp"
#include "autograd/tensor_impl.hpp"

namespace tapegrad {

// x -> y = f(x): forward on a scope dropped at once, keeping y's value only;
// backward: x' = leaf(x's value), y' = f(x') on a fresh scope, y'.backward(dy), dx = x'.grad
template <class T>
Tensor<T> checkpoint(const Tensor<T>& x, const std::vector<Tensor<T>>& parameters,
                     CheckpointedFunction<T> f) {
  std::vector<Tensor<T>> inputs;
  inputs.reserve(parameters.size() + 1);
  inputs.push_back(x);
  inputs.insert(inputs.end(), parameters.begin(), parameters.end());
  if (!will_record(inputs)) return f(x);
  Array<T> value;
  {
    Tensor<T> y;
    {
      TapeScope<T> scope;
      y = f(x);
    }  // f's nodes, and what only they kept, are gone here
    // y's storage is taken when nothing else holds it (f may return x, or a parameter)
    if (y.impl().use_count() == 1) value = std::move(y.impl()->value);
    else value = std::as_const(y).value();
  }
  return record<T>("checkpoint", inputs, std::move(value), [f = std::move(f)](BackwardContext<T>& c) {
    // every input read through the context: an edit since the forward throws GraphError
    // here, where running f again would silently use the new values
    for (std::size_t i = 1; i < c.input_count(); ++i) (void)c.input(i);
    Tensor<T> again(Array<T>(c.input(0)), c.wants(0));
    {
      TapeScope<T> scope;
      const Tensor<T> y = f(again);
      if (!y.has_shape(shape_of(c.grad())))
        fail("checkpoint", "the function gave {} when run again, {} the first time",
             y.shape_string(), shape_str(shape_of(c.grad())));
      y.backward(c.grad());
    }
    if (c.wants(0) && again.has_grad()) c.accumulate(0, std::move(again.grad()));
  });
}

template Tensor<float> checkpoint(const Tensor<float>&, const std::vector<Tensor<float>>&,
                                  CheckpointedFunction<float>);
template Tensor<double> checkpoint(const Tensor<double>&, const std::vector<Tensor<double>>&,
                                   CheckpointedFunction<double>);

}  // namespace tapegrad
