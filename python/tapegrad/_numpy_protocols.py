"""How NumPy treats a tapegrad.Tensor. Without these hooks NumPy would turn a tensor into an
array through __array__ whenever it meets one (`array + t`, `np.exp(t)`, `np.sum(t)`) and
hand back an array: the result right, the graph silently gone. With them:
- `array (op) t` for + - * / ** @ runs tapegrad's reflected operator (the array a constant of
  the tensor's dtype; another dtype is a TypeError naming both);
- `array < t` and the other comparisons are t's mirror comparison (`t > array`): a bool
  array, as comparisons of a tensor always are;
- any other ufunc or NumPy function on a tensor is a TypeError naming the tapegrad function
  to use, or t.numpy() for a detached array.
np.asarray(t) and np.array(t) still convert, explicitly, through __array__."""
import numpy as np

from . import _tapegrad

# ufuncs that are Python operators: (forward, reflected) method of the Tensor
_OPERATOR_UFUNCS = {
    np.add: ("__add__", "__radd__"),
    np.subtract: ("__sub__", "__rsub__"),
    np.multiply: ("__mul__", "__rmul__"),
    np.true_divide: ("__truediv__", "__rtruediv__"),
    np.matmul: ("__matmul__", "__rmatmul__"),
    np.power: ("__pow__", "__rpow__"),
    # comparisons give a bool array outside the graph; `array < t` is `t > array`
    np.equal: ("__eq__", "__eq__"),
    np.not_equal: ("__ne__", "__ne__"),
    np.less: ("__lt__", "__gt__"),
    np.less_equal: ("__le__", "__ge__"),
    np.greater: ("__gt__", "__lt__"),
    np.greater_equal: ("__ge__", "__le__"),
}

# NumPy names whose tapegrad counterpart is spelled differently
_TAPEGRAD_NAMES = {"subtract": "sub", "multiply": "mul", "divide": "div", "true_divide": "div",
                   "negative": "neg", "power": "pow", "amax": "max"}


def _refusal(numpy_call, numpy_name):
    name = _TAPEGRAD_NAMES.get(numpy_name, numpy_name)
    if callable(getattr(_tapegrad, name, None)):
        use = f"use tapegrad.{name}, or t.numpy() for a detached array"
    else:
        use = f"tapegrad has no {numpy_name}; t.numpy() gives a detached array"
    return TypeError(f"numpy.{numpy_call} on a tapegrad.Tensor would return a NumPy array "
                     f"outside the graph; {use}")


def _array_ufunc(self, ufunc, method, *inputs, **kwargs):
    methods = _OPERATOR_UFUNCS.get(ufunc)
    if methods and method == "__call__" and not kwargs and len(inputs) == 2:
        a, b = inputs
        if isinstance(a, _tapegrad.Tensor):
            result = getattr(a, methods[0])(b)
        else:
            result = getattr(b, methods[1])(a)
        if result is not NotImplemented:
            return result
    call = ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}"
    raise _refusal(call, ufunc.__name__)


def _array_function(self, func, types, args, kwargs):
    raise _refusal(func.__name__, func.__name__)


def install(tensor_class):
    tensor_class.__array_ufunc__ = _array_ufunc
    tensor_class.__array_function__ = _array_function
