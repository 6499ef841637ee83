// tapegrad.Tensor (float32 or float64), its constructors from NumPy and Generators, and
// the Python operators.
#include <pybind11/numpy.h>
#include <pybind11/operators.h>
#include <pybind11/stl.h>

#include <cmath>
#include <functional>
#include <optional>
#include <sstream>

#include "arith.hpp"
#include "autograd/shape.hpp"
#include "bindings.hpp"
#include "memory_budget.hpp"
#include "numpy_convert.hpp"
#include "ops/elementwise.hpp"
#include "ops/matmul.hpp"
#include "ops/shape_ops.hpp"

namespace tapegrad::python {
namespace {

py::tuple shape_tuple(const PyTensor& t) {
  Shape s = std::visit([](const auto& x) { return x.shape(); }, t.v);
  py::tuple out(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) out[i] = s[i];
  return out;
}

// A new tensor of `shape` from make_as(double{}) or make_as(float{}), refused with the sizes
// when it cannot fit in memory.
template <class Make>
PyTensor make(const Shape& shape, const py::object& dtype, const char* op, Make&& make_as) {
  const bool is_double = dtype_is_double(op, dtype);
  double elements = 1;
  for (std::size_t n : shape) elements *= double(n);
  require_memory(op, "shape " + shape_str(shape) + " needs", elements * (is_double ? 8 : 4),
                 is_double ? "in float64" : "in float32");
  if (is_double) return PyTensor(make_as(double{}));
  return PyTensor(make_as(float{}));
}

// t[a:b], t[:, a:b], ...: the C++ API slices one axis at a time, step 1.
PyTensor getitem(const PyTensor& t, const py::object& key) {
  py::tuple keys = py::isinstance<py::tuple>(key) ? key.cast<py::tuple>() : py::make_tuple(key);
  Shape shape = std::visit([](const auto& x) { return x.shape(); }, t.v);
  if (keys.size() > shape.size())
    fail("slice", "{} indices for a tensor of shape {}", keys.size(), shape_str(shape));
  PyTensor out = t;
  for (std::size_t axis = 0; axis < keys.size(); ++axis) {
    if (!py::isinstance<py::slice>(keys[axis]))
      throw py::type_error("slice: only slices (a:b) index a tensor, not " +
                           py::repr(keys[axis]).cast<std::string>() +
                           "; take t[i:i+1] and reshape to drop the axis");
    py::ssize_t start = 0, stop = 0, step = 0, length = 0;
    if (!keys[axis].cast<py::slice>().compute(py::ssize_t(shape[axis]), &start, &stop, &step, &length))
      throw py::error_already_set();
    if (step != 1) fail("slice", "step {} along axis {}: only step 1 is supported", step, axis);
    if (start == 0 && std::size_t(stop) == shape[axis]) continue;
    const std::size_t begin = std::size_t(start), end = std::size_t(std::max(start, stop));
    out = unary(out, [&](const auto& x) { return slice(x, long(axis), begin, end); });
  }
  return out;
}

std::string repr(const PyTensor& t) {
  return std::visit(
      [&](const auto& x) {
        std::ostringstream s;
        s << "tapegrad.Tensor(shape=" << x.shape_string() << ", dtype=" << t.dtype()
          << (x.requires_grad() ? ", requires_grad=True" : "") << ")";
        return s.str();
      },
      t.v);
}

void backward(const PyTensor& t, const py::object& grad, bool retain_graph) {
  if (grad.is_none()) {
    py::gil_scoped_release release;
    std::visit([&](const auto& x) { x.backward(retain_graph); }, t.v);
    return;
  }
  PyTensor seed = tensor_from_numpy(grad, false, py::str(t.dtype()));
  py::gil_scoped_release release;
  std::visit(
      [&](const auto& x) {
        using T = element_t<decltype(x)>;
        x.backward(seed.get<T>().value(), retain_graph);
      },
      t.v);
}

void bind_generator(py::module_& m) {
  py::class_<Generator>(m, "Generator",
                        "The seeded source of every random draw (std::mt19937_64): the same "
                        "seed gives the same numbers as the C++ programs.")
      .def(py::init<std::uint64_t>(), py::arg("seed") = 0)
      .def("normal", &Generator::normal, py::arg("mean") = 0.0, py::arg("stddev") = 1.0)
      .def("uniform", &Generator::uniform, py::arg("low") = 0.0, py::arg("high") = 1.0)
      .def("integer", &Generator::integer, py::arg("below"));
}

void bind_constructors(py::module_& m) {
  m.def("tensor", &tensor_from_numpy, py::arg("data"), py::arg("requires_grad") = false,
        py::arg("dtype") = py::none(),
        "A tensor copied from a float32 or float64 array (dtype kept). Other dtypes are "
        "refused unless dtype (float32 or float64, as a string or NumPy dtype) asks for "
        "the conversion.");
  m.def("zeros", [](const Shape& shape, const py::object& dtype, bool rg) {
        return make(shape, dtype, "zeros",
                    [&](auto v) { return Tensor<decltype(v)>::zeros(shape, rg); });
      }, py::arg("shape"), py::arg("dtype") = "float32", py::arg("requires_grad") = false);
  m.def("ones", [](const Shape& shape, const py::object& dtype, bool rg) {
        return make(shape, dtype, "ones",
                    [&](auto v) { return Tensor<decltype(v)>::ones(shape, rg); });
      }, py::arg("shape"), py::arg("dtype") = "float32", py::arg("requires_grad") = false);
  m.def("full", [](const Shape& shape, double value, const py::object& dtype, bool rg) {
        return make(shape, dtype, "full", [&](auto v) {
          return Tensor<decltype(v)>::full(shape, decltype(v)(value), rg);
        });
      }, py::arg("shape"), py::arg("value"), py::arg("dtype") = "float32",
      py::arg("requires_grad") = false);
  m.def("randn", [](const Shape& shape, Generator& gen, double mean, double std,
                    const py::object& dtype, bool rg) {
        return make(shape, dtype, "randn", [&](auto v) {
          using T = decltype(v);
          return Tensor<T>::randn(shape, gen, T(mean), T(std), rg);
        });
      }, py::arg("shape"), py::arg("generator"), py::arg("mean") = 0.0, py::arg("std") = 1.0,
      py::arg("dtype") = "float32", py::arg("requires_grad") = false,
      "Normal draws from the Generator, in the order and with the values of C++'s "
      "Tensor<T>::randn.");
  m.def("uniform", [](const Shape& shape, Generator& gen, double low, double high,
                      const py::object& dtype, bool rg) {
        return make(shape, dtype, "uniform", [&](auto v) {
          using T = decltype(v);
          return Tensor<T>::uniform(shape, gen, T(low), T(high), rg);
        });
      }, py::arg("shape"), py::arg("generator"), py::arg("low") = 0.0, py::arg("high") = 1.0,
      py::arg("dtype") = "float32", py::arg("requires_grad") = false);
  m.def("live_tensors", [](const py::object& dtype) {
        return dtype_is_double("live_tensors", dtype) ? live_tensors<double>()
                                                      : live_tensors<float>();
      }, py::arg("dtype") = "float32", "Tensors of this dtype alive in the process (leak checks).");
  m.def("_dtype_name", [](const py::object& dtype, const std::string& op) {
        return dtype_name_of(op.c_str(), dtype);
      }, py::arg("dtype"), py::arg("op"), "'float32' or 'float64' for any spelling of them");
}

// t (op) x and x (op) t, x a tensor, a NumPy array or a number (a constant, never on the
// tape); NotImplemented for anything else, so that Python tries the other operand.
template <class Op>
void def_arith_operators(py::class_<PyTensor>& c, const char* op, const char* name,
                         const char* reflected) {
  auto result = [](const std::optional<PyTensor>& r) -> py::object {
    if (r) return py::cast(*r);
    return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  };
  c.def(name, [op, result](const PyTensor& a, const py::object& b) {
     return result(try_tensor_op<Op>(op, a, b, true));
   }, py::is_operator())
      .def(reflected, [op, result](const PyTensor& b, const py::object& a) {
        return result(try_tensor_op<Op>(op, b, a, false));
      }, py::is_operator());
}

// t (cmp) x elementwise as NumPy compares, x a tensor, an array or a number: a bool array,
// outside the graph. NotImplemented for anything else, so that `t == "a"` is False as for
// any two unrelated objects. Shapes that do not broadcast are a ShapeError naming `op`.
py::object compare(const char* op, const char* method, const PyTensor& t, const py::object& x) {
  py::object other = x;
  if (py::isinstance<PyTensor>(x)) other = tensor_to_numpy(x.cast<const PyTensor&>(), false);
  else if (!py::isinstance<py::array>(x) && !number_of(x))
    return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  const py::array values = tensor_to_numpy(t, false);
  if (py::isinstance<py::array>(other)) {
    const py::array a = other.cast<py::array>();
    broadcast_shapes(op, Shape(values.shape(), values.shape() + values.ndim()),
                     Shape(a.shape(), a.shape() + a.ndim()));
  }
  return values.attr(method)(other);
}

// Python's comparison operators; the reflected forms (2 < t, array < t) reach t's mirror
// image (t > 2) through Python and _numpy_protocols.py.
void def_comparisons(py::class_<PyTensor>& c) {
  static constexpr const char* kComparisons[][2] = {
      {"equal", "__eq__"},         {"not_equal", "__ne__"}, {"less", "__lt__"},
      {"less_equal", "__le__"},    {"greater", "__gt__"},   {"greater_equal", "__ge__"}};
  for (const auto& [op, method] : kComparisons)
    c.def(method, [op = op, method = method](const PyTensor& t, const py::object& x) {
      return compare(op, method, t, x);
    }, py::is_operator());
  // Defining __eq__ removes the hash Python gives by default; a tensor stays usable as a
  // dict key or in a set, by identity, as in PyTorch.
  c.attr("__hash__") = py::module_::import("builtins").attr("object").attr("__hash__");
  c.def("__bool__", [](const PyTensor& t) {
    return std::visit([](const auto& x) {
      if (x.size() != 1)
        throw py::type_error("bool() of a tensor of shape " + x.shape_string() +
                             ": the truth value of a tensor of " + std::to_string(x.size()) +
                             " elements is ambiguous; compare it and use .any() or .all()");
      return x.item() != 0;
    }, t.v);
  });
}

void bind_operators(py::class_<PyTensor>& c) {
  def_arith_operators<std::plus<>>(c, "add", "__add__", "__radd__");
  def_arith_operators<std::minus<>>(c, "sub", "__sub__", "__rsub__");
  def_arith_operators<std::multiplies<>>(c, "mul", "__mul__", "__rmul__");
  def_arith_operators<std::divides<>>(c, "div", "__truediv__", "__rtruediv__");
  def_arith_operators<MatmulOp>(c, "matmul", "__matmul__", "__rmatmul__");
  def_arith_operators<PowOp>(c, "pow", "__pow__", "__rpow__");
  c.def("__neg__", [](const PyTensor& a) { return unary(a, [](const auto& x) { return neg(x); }); });
}

}  // namespace

void bind_tensor(py::module_& m) {
  bind_generator(m);
  py::class_<PyTensor> c(m, "Tensor",
                         "A float32 or float64 tensor on tapegrad's tape. Made by "
                         "Tensor(numpy_array) or tapegrad.tensor(numpy_array) (the same), "
                         "zeros, randn, or any op.");
  // Tensor(array) is tensor(array): a user who reaches for the class gets the same copy
  // and the same dtype rules, not pybind11's "No constructor defined".
  c.def(py::init(&tensor_from_numpy), py::arg("data"), py::arg("requires_grad") = false,
        py::arg("dtype") = py::none());
  c.def_property_readonly("shape", &shape_tuple)
      .def_property_readonly("dtype", &PyTensor::dtype)
      .def_property_readonly("ndim", [](const PyTensor& t) {
        return std::visit([](const auto& x) { return x.dim(); }, t.v);
      })
      .def_property_readonly("size", [](const PyTensor& t) {
        return std::visit([](const auto& x) { return x.size(); }, t.v);
      })
      .def("__len__", [](const PyTensor& t) {
        Shape s = std::visit([](const auto& x) { return x.shape(); }, t.v);
        if (s.empty()) throw py::type_error("len() of a 0-d tensor");
        return s[0];
      })
      .def_property("requires_grad",
                    [](const PyTensor& t) {
                      return std::visit([](const auto& x) { return x.requires_grad(); }, t.v);
                    },
                    [](PyTensor& t, bool r) {
                      std::visit([&](auto& x) { x.set_requires_grad(r); }, t.v);
                    })
      .def_property_readonly("is_leaf", [](const PyTensor& t) {
        return std::visit([](const auto& x) { return x.is_leaf(); }, t.v);
      })
      .def_property_readonly("grad", [](const PyTensor& t) -> py::object {
        return std::visit([](const auto& x) -> py::object {
          if (!x.has_grad()) return py::none();
          return array_to_numpy(x.grad());
        }, t.v);
      }, "d(loss)/d(this) as a NumPy array (a copy), or None before a backward reached it")
      .def("zero_grad", [](PyTensor& t) { std::visit([](auto& x) { x.zero_grad(); }, t.v); })
      .def("retain_grad", [](PyTensor& t) {
        std::visit([](auto& x) { x.retain_grad(); }, t.v);
        return t;
      })
      .def("backward", &backward, py::arg("grad") = py::none(), py::arg("retain_graph") = false,
           "Reverse sweep from this tensor (one element, or seeded with grad). Releases the GIL.")
      .def("item", [](const PyTensor& t) {
        return std::visit([](const auto& x) { return double(x.item()); }, t.v);
      })
      .def("numpy", &tensor_to_numpy, py::arg("copy") = true,
           "A copy (default), or with copy=False a read-only view that keeps the tensor alive")
      .def("__array__", [](const PyTensor& t, const py::object& dtype) {
        py::array a = tensor_to_numpy(t, true);
        return dtype.is_none() ? a : py::array(a.attr("astype")(dtype));
      }, py::arg("dtype") = py::none())
      .def("detach", [](const PyTensor& t) { return unary(t, [](const auto& x) { return x.detach(); }); })
      .def("astype", [](const PyTensor& t, const py::object& dtype) {
        return tensor_from_numpy(tensor_to_numpy(t, true), false,
                                 py::str(dtype_name_of("astype", dtype)));
      }, py::arg("dtype"), "A copy of the value in another dtype (a new leaf, no history)")
      .def("__getitem__", &getitem)
      .def("__repr__", &repr);
  bind_operators(c);
  def_comparisons(c);
  bind_constructors(m);
}

}  // namespace tapegrad::python
