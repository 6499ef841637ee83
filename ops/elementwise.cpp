#include "ops/elementwise.hpp"

#include <cmath>

#include <xtensor/xmath.hpp>
#include <xtensor/xoperation.hpp>

#include "autograd/shape.hpp"
#include "autograd/tape.hpp"
#include "autograd/tensor_impl.hpp"
#include "ops/kernels/activation.hpp"

namespace tapegrad {

namespace {
template <class T>
void check_broadcast(const char* op, const Tensor<T>& a, const Tensor<T>& b) {
  broadcast_shapes(op, a.shape(), b.shape());
}
}  // namespace

// ---- binary ops: z has the broadcast shape; sum_to folds each gradient back --------

// z = a + b
template <class T>
Tensor<T> add(const Tensor<T>& a, const Tensor<T>& b) {
  check_broadcast("add", a, b);
  return record<T>("add", {a, b}, a.value() + b.value(), [](BackwardContext<T>& c) {
    // backward: da = dz, db = dz
    c.accumulate(0, c.grad());
    c.accumulate(1, c.take_grad());
  });
}
template <class T>
Tensor<T> add(const Tensor<T>& a, Scalar<T> b) {
  return record<T>("add_scalar", {a}, a.value() + b,
                   [](BackwardContext<T>& c) { c.accumulate(0, c.take_grad()); });
}

// z = a - b
template <class T>
Tensor<T> sub(const Tensor<T>& a, const Tensor<T>& b) {
  check_broadcast("sub", a, b);
  return record<T>("sub", {a, b}, a.value() - b.value(), [](BackwardContext<T>& c) {
    // backward: da = dz, db = -dz
    if (c.wants(1)) c.accumulate(1, -c.grad());
    c.accumulate(0, c.take_grad());
  });
}
template <class T>
Tensor<T> sub(const Tensor<T>& a, Scalar<T> b) {
  return record<T>("sub_scalar", {a}, a.value() - b,
                   [](BackwardContext<T>& c) { c.accumulate(0, c.take_grad()); });
}
template <class T>
Tensor<T> sub(Scalar<T> a, const Tensor<T>& b) {
  return record<T>("rsub_scalar", {b}, a - b.value(),
                   [](BackwardContext<T>& c) { c.accumulate(0, -c.grad()); });
}

// z = a * b
template <class T>
Tensor<T> mul(const Tensor<T>& a, const Tensor<T>& b) {
  check_broadcast("mul", a, b);
  return record<T>("mul", {a, b}, a.value() * b.value(), [](BackwardContext<T>& c) {
    // backward: da = dz * b, db = dz * a
    if (c.wants(0)) c.accumulate(0, c.grad() * c.input(1));
    if (c.wants(1)) c.accumulate(1, c.grad() * c.input(0));
  });
}
template <class T>
Tensor<T> mul(const Tensor<T>& a, Scalar<T> b) {
  return record<T>("mul_scalar", {a}, a.value() * b,
                   [b](BackwardContext<T>& c) { c.accumulate(0, c.grad() * b); });
}

// z = a / b
template <class T>
Tensor<T> div(const Tensor<T>& a, const Tensor<T>& b) {
  check_broadcast("div", a, b);
  return record<T>("div", {a, b}, a.value() / b.value(), [](BackwardContext<T>& c) {
    // backward: da = dz / b, db = -dz * z / b
    if (c.wants(0)) c.accumulate(0, c.grad() / c.input(1));
    if (c.wants(1)) c.accumulate(1, -c.grad() * c.output() / c.input(1));
  });
}
template <class T>
Tensor<T> div(const Tensor<T>& a, Scalar<T> b) {
  return record<T>("div_scalar", {a}, a.value() / b,
                   [b](BackwardContext<T>& c) { c.accumulate(0, c.grad() / b); });
}
template <class T>
Tensor<T> div(Scalar<T> a, const Tensor<T>& b) {
  // z = a / b; backward: db = -dz * z / b
  return record<T>("rdiv_scalar", {b}, a / b.value(), [](BackwardContext<T>& c) {
    c.accumulate(0, -c.grad() * c.output() / c.input(0));
  });
}

// ---- unary ops ----------------------------------------------------------------------

// z = -a; backward: da = -dz
template <class T>
Tensor<T> neg(const Tensor<T>& a) {
  return record<T>("neg", {a}, -a.value(),
                   [](BackwardContext<T>& c) { c.accumulate(0, -c.grad()); });
}

// z = exp(a); backward: da = dz * z
template <class T>
Tensor<T> exp(const Tensor<T>& a) {
  return record<T>("exp", {a}, xt::exp(a.value()),
                   [](BackwardContext<T>& c) { c.accumulate(0, c.grad() * c.output()); });
}

// z = log(a); backward: da = dz / a
template <class T>
Tensor<T> log(const Tensor<T>& a) {
  return record<T>("log", {a}, xt::log(a.value()),
                   [](BackwardContext<T>& c) { c.accumulate(0, c.grad() / c.input(0)); });
}

// z = sqrt(a); backward: da = dz / (2 z)
template <class T>
Tensor<T> sqrt(const Tensor<T>& a) {
  return record<T>("sqrt", {a}, xt::sqrt(a.value()), [](BackwardContext<T>& c) {
    c.accumulate(0, c.grad() / (T(2) * c.output()));
  });
}

// z = a^p; backward: da = dz * p * a^(p-1)
template <class T>
Tensor<T> pow(const Tensor<T>& a, Scalar<T> p) {
  return record<T>("pow", {a}, xt::pow(a.value(), p), [p](BackwardContext<T>& c) {
    c.accumulate(0, c.grad() * p * xt::pow(c.input(0), p - T(1)));
  });
}

// z = tanh(a); backward: da = dz * (1 - z^2)
template <class T>
Tensor<T> tanh(const Tensor<T>& a) {
  return record<T>("tanh", {a}, xt::tanh(a.value()), [](BackwardContext<T>& c) {
    c.accumulate(0, c.grad() * (T(1) - c.output() * c.output()));
  });
}

// z = max(a, 0); backward: da = dz * [a > 0]
template <class T>
Tensor<T> relu(const Tensor<T>& a) {
  return record<T>("relu", {a}, xt::maximum(a.value(), T(0)), [](BackwardContext<T>& c) {
    c.accumulate(0, xt::where(c.input(0) > T(0), c.grad(), T(0)));
  });
}

// z = 1 / (1 + exp(-a)); backward: da = dz * z * (1 - z)
template <class T>
Tensor<T> sigmoid(const Tensor<T>& a) {
  return record<T>("sigmoid", {a}, T(1) / (T(1) + xt::exp(-a.value())),
                   [](BackwardContext<T>& c) {
                     c.accumulate(0, c.grad() * c.output() * (T(1) - c.output()));
                   });
}

// z = a * s, s = sigmoid(a); backward: da = dz * s * (1 + a * (1 - s))
// 1 - s is taken as sigmoid(-a) rather than by subtraction, which keeps its digits where s
// rounds to 1. An exp that overflows only drives s to exactly 0 or 1 (a / inf = -0 at
// a = -1000), so no NaN appears at either end.
template <class T>
Tensor<T> silu(const Tensor<T>& a) {
  const Array<T>& x = a.value();
  return record<T>("silu", {a}, x / (T(1) + xt::exp(-x)), [](BackwardContext<T>& c) {
    const Array<T>& x = c.input(0);
    c.accumulate(0, c.grad() / (T(1) + xt::exp(-x)) * (T(1) + x / (T(1) + xt::exp(x))));
  });
}

// z = 0.5 a (1 + tanh(u)), u = sqrt(2/pi) (a + 0.044715 a^3)
// backward: da = dz * (0.5 (1 + t) + 0.5 a (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 a^2))
// Both in one vectorised pass (ops/kernels/activation.cpp); the backward reuses the tanh
// of the forward, kept with the node only when the result is recorded.
template <class T>
Tensor<T> gelu(const Tensor<T>& a) {
  // a: any shape -> z: the same shape
  const Array<T>& x = a.value();
  Array<T> z = Array<T>::from_shape(x.shape());
  const bool recorded = will_record<T>({a});
  Array<T> t = recorded ? Array<T>::from_shape(x.shape()) : no_elements<T>();
  kernels::gelu_forward(x.data(), z.data(), recorded ? t.data() : nullptr, x.size());
  return record<T>("gelu", {a}, std::move(z), [t = std::move(t)](BackwardContext<T>& c) {
    const Array<T>& x = c.input(0);
    Array<T> dx = Array<T>::from_shape(x.shape());
    kernels::gelu_backward(x.data(), t.data(), c.grad().data(), dx.data(), x.size());
    c.accumulate(0, std::move(dx));
  });
}

#define TAPEGRAD_INSTANTIATE(T)                                         \
  template Tensor<T> add(const Tensor<T>&, const Tensor<T>&);           \
  template Tensor<T> add(const Tensor<T>&, T);                          \
  template Tensor<T> sub(const Tensor<T>&, const Tensor<T>&);           \
  template Tensor<T> sub(const Tensor<T>&, T);                          \
  template Tensor<T> sub(T, const Tensor<T>&);                          \
  template Tensor<T> mul(const Tensor<T>&, const Tensor<T>&);           \
  template Tensor<T> mul(const Tensor<T>&, T);                          \
  template Tensor<T> div(const Tensor<T>&, const Tensor<T>&);           \
  template Tensor<T> div(const Tensor<T>&, T);                          \
  template Tensor<T> div(T, const Tensor<T>&);                          \
  template Tensor<T> neg(const Tensor<T>&);                             \
  template Tensor<T> exp(const Tensor<T>&);                             \
  template Tensor<T> log(const Tensor<T>&);                             \
  template Tensor<T> sqrt(const Tensor<T>&);                            \
  template Tensor<T> pow(const Tensor<T>&, T);                          \
  template Tensor<T> tanh(const Tensor<T>&);                            \
  template Tensor<T> relu(const Tensor<T>&);                            \
  template Tensor<T> sigmoid(const Tensor<T>&);                         \
  template Tensor<T> silu(const Tensor<T>&);                            \
  template Tensor<T> gelu(const Tensor<T>&);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad
