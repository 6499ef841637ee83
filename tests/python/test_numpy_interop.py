"""A tensor meeting a NumPy array: the result stays on the tape (the array a constant of the
tensor's dtype), dtypes never mix silently, and NumPy's own functions refuse a tensor
instead of quietly turning it into an array with the graph gone."""
import operator

import numpy as np
import pytest
import tapegrad as tg

X = np.array([[1.0, 2.0], [3.0, 4.0]])
C = np.array([[0.5, -1.0], [2.0, 0.25]])

# operator, the same written with NumPy
OPERATORS = [operator.add, operator.sub, operator.mul, operator.truediv, operator.matmul]


@pytest.mark.parametrize("op", OPERATORS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("array_first", [False, True], ids=["tensor_op_array", "array_op_tensor"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float32", "float64"])
def test_an_array_operand_is_a_constant_and_the_graph_survives(op, array_first, dtype):
    x = tg.tensor(X.astype(dtype), requires_grad=True)
    c = C.astype(dtype)
    y = op(c, x) if array_first else op(x, c)
    assert isinstance(y, tg.Tensor), f"got {type(y).__name__}"
    assert y.dtype == np.dtype(dtype).name
    expect = op(c, X.astype(dtype)) if array_first else op(X.astype(dtype), c)
    np.testing.assert_allclose(y.numpy(), expect, rtol=1e-6)
    # the gradient reaches x through the op: the graph is there
    tg.sum(y).backward()
    assert x.grad is not None and x.grad.shape == X.shape
    # and equals the gradient with the array made a tensor by hand
    x2 = tg.tensor(X.astype(dtype), requires_grad=True)
    ct = tg.tensor(c)
    tg.sum(op(ct, x2) if array_first else op(x2, ct)).backward()
    np.testing.assert_allclose(x.grad, x2.grad, rtol=1e-6)


@pytest.mark.parametrize("array_first", [False, True])
def test_an_array_of_another_dtype_is_a_type_error_naming_both(array_first):
    x = tg.tensor(X.astype(np.float32), requires_grad=True)
    for c in (C, C.astype(np.int64)):
        with pytest.raises(TypeError, match=rf"float32.*{c.dtype}|{c.dtype}.*float32"):
            (c + x) if array_first else (x + c)
        with pytest.raises(TypeError, match=rf"float32.*{c.dtype}|{c.dtype}.*float32"):
            (c @ x) if array_first else (x @ c)


def test_the_module_functions_take_an_array_operand_too():
    x = tg.tensor(X, requires_grad=True)
    y = tg.mul(C, x)
    assert isinstance(y, tg.Tensor)
    tg.sum(y).backward()
    np.testing.assert_array_equal(x.grad, C)
    with pytest.raises(TypeError, match="float64.*float32|float32.*float64"):
        tg.add(x, C.astype(np.float32))


def test_numpy_scalars_stay_numbers():
    x = tg.tensor(X.astype(np.float32))
    for s in (np.float64(2.0), np.float32(2.0), np.int64(2)):
        for y in (x * s, s * x):
            assert isinstance(y, tg.Tensor) and y.dtype == "float32"
            np.testing.assert_array_equal(y.numpy(), 2 * X.astype(np.float32))


@pytest.mark.parametrize("ufunc, use", [(np.exp, "tapegrad.exp"), (np.tanh, "tapegrad.tanh"),
                                        (np.negative, "tapegrad.neg"), (np.sqrt, "tapegrad.sqrt")])
def test_a_numpy_ufunc_on_a_tensor_names_the_tapegrad_function(ufunc, use):
    x = tg.tensor(X, requires_grad=True)
    with pytest.raises(TypeError, match=rf"numpy\.{ufunc.__name__}.*{use}"):
        ufunc(x)


def test_a_ufunc_without_a_counterpart_says_how_to_leave_the_tape():
    x = tg.tensor(X, requires_grad=True)
    with pytest.raises(TypeError, match=r"numpy\.sin.*\.numpy\(\)"):
        np.sin(x)
    with pytest.raises(TypeError, match=r"numpy\.arctan2.*\.numpy\(\)"):
        np.arctan2(C, x)


def test_an_array_to_the_power_of_a_tensor_stays_on_the_tape():
    x = tg.tensor(X, requires_grad=True)
    y = C ** x  # np.power reaches the tensor's __rpow__
    assert isinstance(y, tg.Tensor)
    np.testing.assert_allclose(y.numpy(), C ** X, rtol=1e-12)


def test_numpy_functions_refuse_a_tensor_and_name_the_tapegrad_one():
    x = tg.tensor(X, requires_grad=True)
    with pytest.raises(TypeError, match=r"numpy\.sum.*tapegrad\.sum"):
        np.sum(x)
    with pytest.raises(TypeError, match=r"numpy\.concatenate.*tapegrad\.concatenate"):
        np.concatenate([x, x])


def test_explicit_conversion_still_works():
    x = tg.tensor(X, requires_grad=True)
    np.testing.assert_array_equal(np.asarray(x), X)
    np.testing.assert_array_equal(np.array(x, dtype=np.float32), X.astype(np.float32))
    np.testing.assert_array_equal(x.numpy() + C, X + C)
