#include "ops/elementwise.hpp"

#include <utility>

#include "autograd/shape.hpp"
#include "autograd/tape.hpp"
#include "autograd/tensor_impl.hpp"
#include "ops/attention_spec.hpp"  // valid_softcap
#include "ops/kernels/rowwise.hpp"  // softcap_backward_inplace
#include "ops/kernels/activation.hpp"
#include "ops/kernels/elementwise.hpp"

namespace tapegrad {

// The loops are ops/kernels/elementwise.cpp's: as xtensor expressions, each formula below
// instantiated xtensor's broadcasting assignment for itself, in float and double.
namespace {
using kernels::Binary;
using kernels::Unary;
using kernels::extents;
using kernels::kScalarShape;

// a op b into a new array of `shape`, the broadcast of a's and b's shapes (the caller's
// broadcast_shapes checked them, or they are a gradient's and an input's)
template <class T, class S>
Array<T> binary_value(Binary op, const Array<T>& a, const Array<T>& b, const S& shape) {
  Array<T> z = Array<T>::from_shape(shape);
  kernels::binary(op, a.data(), extents(a.shape()), b.data(), extents(b.shape()), z.data(),
                  extents(z.shape()));
  return z;
}

// a op b with one operand a constant: the array's shape
template <class T>
Array<T> binary_value(Binary op, const Array<T>& a, T b) {
  Array<T> z = Array<T>::from_shape(a.shape());
  kernels::binary(op, a.data(), extents(a.shape()), &b, kScalarShape, z.data(),
                  extents(z.shape()));
  return z;
}
template <class T>
Array<T> binary_value(Binary op, T a, const Array<T>& b) {
  Array<T> z = Array<T>::from_shape(b.shape());
  kernels::binary(op, &a, kScalarShape, b.data(), extents(b.shape()), z.data(),
                  extents(z.shape()));
  return z;
}

template <class T>
Array<T> binary_forward(Binary op, const char* name, const Tensor<T>& a, const Tensor<T>& b) {
  return binary_value(op, a.value(), b.value(), broadcast_shapes(name, a.shape(), b.shape()));
}

// db = -dz * z / b over z's shape, before sum_to folds it to b's
template <class T>
Array<T> quotient_grad(const Array<T>& dz, const Array<T>& z, const Array<T>& b) {
  Array<T> db = Array<T>::from_shape(z.shape());
  kernels::quotient_grad(dz.data(), z.data(), extents(z.shape()), b.data(), extents(b.shape()),
                         db.data());
  return db;
}

// da and db of z = a^b over z's shape (sum_to then folds each), for the inputs that want
// them: `a` and `b` are the base and the exponent with their shapes, either a constant's.
template <class T>
std::pair<Array<T>, Array<T>> power_grads(const Array<T>& dz, const Array<T>& z, const T* a,
                                          kernels::Extents a_shape, const T* b,
                                          kernels::Extents b_shape, bool want_a, bool want_b) {
  Array<T> da = want_a ? Array<T>::from_shape(z.shape()) : no_elements<T>();
  Array<T> db = want_b ? Array<T>::from_shape(z.shape()) : no_elements<T>();
  kernels::power_grads(dz.data(), z.data(), extents(z.shape()), a, a_shape, b, b_shape,
                       want_a ? da.data() : nullptr, want_b ? db.data() : nullptr);
  return {std::move(da), std::move(db)};
}

template <class T>
Array<T> unary_value(Unary op, const Array<T>& x) {
  Array<T> z = Array<T>::from_shape(x.shape());
  kernels::unary(op, x.data(), z.data(), x.size());
  return z;
}

template <class T>
Array<T> negated(const Array<T>& x) {
  return unary_value(Unary::neg, x);
}

// dz * op'(x), from `saved`: the op's input or output, whichever its formula reads
// (kernels::unary_backward says which)
template <class T>
Array<T> unary_grad(Unary op, const Array<T>& dz, const Array<T>& saved) {
  Array<T> dx = Array<T>::from_shape(dz.shape());
  kernels::unary_backward(op, saved.data(), dz.data(), dx.data(), dz.size());
  return dx;
}
}  // namespace

// ---- binary ops: z has the broadcast shape; sum_to folds each gradient back --------

// z = a + b
template <class T>
Tensor<T> add(const Tensor<T>& a, const Tensor<T>& b) {
  Array<T> z = binary_forward(Binary::add, "add", a, b);
  return record<T>("add", {a, b}, std::move(z), [](BackwardContext<T>& c) {
    // backward: da = dz, db = dz
    c.accumulate(0, c.grad());
    c.accumulate(1, c.take_grad());
  });
}
template <class T>
Tensor<T> add(const Tensor<T>& a, Scalar<T> b) {
  return record<T>("add_scalar", {a}, binary_value(Binary::add, a.value(), b),
                   [](BackwardContext<T>& c) { c.accumulate(0, c.take_grad()); });
}

// z = a - b
template <class T>
Tensor<T> sub(const Tensor<T>& a, const Tensor<T>& b) {
  Array<T> z = binary_forward(Binary::sub, "sub", a, b);
  return record<T>("sub", {a, b}, std::move(z), [](BackwardContext<T>& c) {
    // backward: da = dz, db = -dz
    if (c.wants(1)) c.accumulate(1, negated(c.grad()));
    c.accumulate(0, c.take_grad());
  });
}
template <class T>
Tensor<T> sub(const Tensor<T>& a, Scalar<T> b) {
  return record<T>("sub_scalar", {a}, binary_value(Binary::sub, a.value(), b),
                   [](BackwardContext<T>& c) { c.accumulate(0, c.take_grad()); });
}
template <class T>
Tensor<T> sub(Scalar<T> a, const Tensor<T>& b) {
  return record<T>("rsub_scalar", {b}, binary_value(Binary::sub, a, b.value()),
                   [](BackwardContext<T>& c) { c.accumulate(0, negated(c.grad())); });
}

// z = a * b
template <class T>
Tensor<T> mul(const Tensor<T>& a, const Tensor<T>& b) {
  Array<T> z = binary_forward(Binary::mul, "mul", a, b);
  return record<T>("mul", {a, b}, std::move(z), [](BackwardContext<T>& c) {
    // backward: da = dz * b, db = dz * a
    const Array<T>& dz = c.grad();
    if (c.wants(0)) c.accumulate(0, binary_value(Binary::mul, dz, c.input(1), dz.shape()));
    if (c.wants(1)) c.accumulate(1, binary_value(Binary::mul, dz, c.input(0), dz.shape()));
  });
}
template <class T>
Tensor<T> mul(const Tensor<T>& a, Scalar<T> b) {
  return record<T>("mul_scalar", {a}, binary_value(Binary::mul, a.value(), b),
                   [b](BackwardContext<T>& c) {
                     c.accumulate(0, binary_value(Binary::mul, c.grad(), b));
                   });
}

// z = a / b
template <class T>
Tensor<T> div(const Tensor<T>& a, const Tensor<T>& b) {
  Array<T> z = binary_forward(Binary::div, "div", a, b);
  return record<T>("div", {a, b}, std::move(z), [](BackwardContext<T>& c) {
    // backward: da = dz / b, db = -dz * z / b
    const Array<T>& dz = c.grad();
    if (c.wants(0)) c.accumulate(0, binary_value(Binary::div, dz, c.input(1), dz.shape()));
    if (c.wants(1)) c.accumulate(1, quotient_grad(dz, c.output(), c.input(1)));
  });
}
template <class T>
Tensor<T> div(const Tensor<T>& a, Scalar<T> b) {
  return record<T>("div_scalar", {a}, binary_value(Binary::div, a.value(), b),
                   [b](BackwardContext<T>& c) {
                     c.accumulate(0, binary_value(Binary::div, c.grad(), b));
                   });
}
template <class T>
Tensor<T> div(Scalar<T> a, const Tensor<T>& b) {
  // z = a / b; backward: db = -dz * z / b
  return record<T>("rdiv_scalar", {b}, binary_value(Binary::div, a, b.value()),
                   [](BackwardContext<T>& c) {
                     c.accumulate(0, quotient_grad(c.grad(), c.output(), c.input(0)));
                   });
}

// ---- unary ops ----------------------------------------------------------------------

// z = -a; backward: da = -dz
template <class T>
Tensor<T> neg(const Tensor<T>& a) {
  return record<T>("neg", {a}, negated(a.value()),
                   [](BackwardContext<T>& c) { c.accumulate(0, negated(c.grad())); });
}

// z = exp(a); backward: da = dz * z
template <class T>
Tensor<T> exp(const Tensor<T>& a) {
  return record<T>("exp", {a}, unary_value(Unary::exp, a.value()), [](BackwardContext<T>& c) {
    c.accumulate(0, unary_grad(Unary::exp, c.grad(), c.output()));
  });
}

// z = log(a); backward: da = dz / a
template <class T>
Tensor<T> log(const Tensor<T>& a) {
  return record<T>("log", {a}, unary_value(Unary::log, a.value()), [](BackwardContext<T>& c) {
    c.accumulate(0, unary_grad(Unary::log, c.grad(), c.input(0)));
  });
}

// z = sqrt(a); backward: da = dz / (2 z)
template <class T>
Tensor<T> sqrt(const Tensor<T>& a) {
  return record<T>("sqrt", {a}, unary_value(Unary::sqrt, a.value()), [](BackwardContext<T>& c) {
    c.accumulate(0, unary_grad(Unary::sqrt, c.grad(), c.output()));
  });
}

// z = a^p; backward: da = dz * p * a^(p-1)
template <class T>
Tensor<T> pow(const Tensor<T>& a, Scalar<T> p) {
  const Array<T>& x = a.value();
  Array<T> z = Array<T>::from_shape(x.shape());
  kernels::power(x.data(), p, z.data(), x.size());
  return record<T>("pow_scalar", {a}, std::move(z), [p](BackwardContext<T>& c) {
    const Array<T>& x = c.input(0);
    Array<T> dx = Array<T>::from_shape(x.shape());
    kernels::power_backward(x.data(), p, c.grad().data(), dx.data(), x.size());
    c.accumulate(0, std::move(dx));
  });
}

// z = a^b, z has the broadcast shape
template <class T>
Tensor<T> pow(const Tensor<T>& a, const Tensor<T>& b) {
  Array<T> z = binary_forward(Binary::pow, "pow", a, b);
  return record<T>("pow", {a, b}, std::move(z), [](BackwardContext<T>& c) {
    // backward: da = dz * b * a^(b-1), db = dz * z * ln a
    const Array<T>& x = c.input(0);
    const Array<T>& p = c.input(1);
    auto [da, db] = power_grads(c.grad(), c.output(), x.data(), extents(x.shape()), p.data(),
                                extents(p.shape()), c.wants(0), c.wants(1));
    if (c.wants(0)) c.accumulate(0, std::move(da));
    if (c.wants(1)) c.accumulate(1, std::move(db));
  });
}
template <class T>
Tensor<T> pow(Scalar<T> a, const Tensor<T>& b) {
  // z = a^b; backward: db = dz * z * ln a
  return record<T>("rpow_scalar", {b}, binary_value(Binary::pow, a, b.value()),
                   [a](BackwardContext<T>& c) {
                     const Array<T>& p = c.input(0);
                     c.accumulate(0, power_grads(c.grad(), c.output(), &a, kScalarShape, p.data(),
                                                 extents(p.shape()), false, true)
                                         .second);
                   });
}

// z = tanh(a); backward: da = dz * (1 - z^2)
template <class T>
Tensor<T> tanh(const Tensor<T>& a) {
  return record<T>("tanh", {a}, unary_value(Unary::tanh, a.value()), [](BackwardContext<T>& c) {
    c.accumulate(0, unary_grad(Unary::tanh, c.grad(), c.output()));
  });
}

// z = c * tanh(a * (1 / c)), the products and tanh of mul and tanh themselves; backward:
// da = dz * (1 - (z / c)^2), 1 - tanh^2 from the output
template <class T>
Tensor<T> softcap(const Tensor<T>& a, double c) {
  if (!(c > 0) || !valid_softcap(c))
    fail("softcap", "c must be in [{}, {}], got {} (a is {})", kMinSoftcap, kMaxSoftcap, c,
         a.shape_string());
  const T cap = T(c), inv = T(1 / c);
  Array<T> z = binary_value(Binary::mul, unary_value(Unary::tanh, binary_value(Binary::mul, a.value(), inv)),
                            cap);
  return record<T>("softcap", {a}, std::move(z), [cap](BackwardContext<T>& ctx) {
    Array<T> da = ctx.grad();
    kernels::softcap_backward_inplace(ctx.output().data(), da.data(), da.size(), cap);
    ctx.accumulate(0, std::move(da));
  });
}

// z = max(a, 0); backward: da = dz * [a > 0]
template <class T>
Tensor<T> relu(const Tensor<T>& a) {
  return record<T>("relu", {a}, unary_value(Unary::relu, a.value()), [](BackwardContext<T>& c) {
    c.accumulate(0, unary_grad(Unary::relu, c.grad(), c.input(0)));
  });
}

// z = 1 / (1 + exp(-a)); backward: da = dz * z * (1 - z)
template <class T>
Tensor<T> sigmoid(const Tensor<T>& a) {
  return record<T>("sigmoid", {a}, unary_value(Unary::sigmoid, a.value()),
                   [](BackwardContext<T>& c) {
                     c.accumulate(0, unary_grad(Unary::sigmoid, c.grad(), c.output()));
                   });
}

// z = a * s, s = sigmoid(a); backward: da = dz * s * (1 + a * (1 - s))
// 1 - s is taken as sigmoid(-a) rather than by subtraction, which keeps its digits where s
// rounds to 1. An exp that overflows only drives s to exactly 0 or 1 (a / inf = -0 at
// a = -1000), so no NaN appears at either end.
// As computed (ops/kernels/elementwise.cpp): z = a / (1 + exp(-a)),
// da = dz / (1 + exp(-a)) * (1 + a / (1 + exp(a))).
template <class T>
Tensor<T> silu(const Tensor<T>& a) {
  return record<T>("silu", {a}, unary_value(Unary::silu, a.value()), [](BackwardContext<T>& c) {
    c.accumulate(0, unary_grad(Unary::silu, c.grad(), c.input(0)));
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
  template Tensor<T> pow(const Tensor<T>&, const Tensor<T>&);           \
  template Tensor<T> pow(T, const Tensor<T>&);                          \
  template Tensor<T> tanh(const Tensor<T>&);                            \
  template Tensor<T> softcap(const Tensor<T>&, double);                            \
  template Tensor<T> relu(const Tensor<T>&);                            \
  template Tensor<T> sigmoid(const Tensor<T>&);                         \
  template Tensor<T> silu(const Tensor<T>&);                            \
  template Tensor<T> gelu(const Tensor<T>&);
TAPEGRAD_INSTANTIATE(float)
TAPEGRAD_INSTANTIATE(double)
#undef TAPEGRAD_INSTANTIATE

}  // namespace tapegrad
