"""Comparisons of tensors compare values, elementwise, as NumPy and PyTorch do: a bool NumPy
array (no graph) with broadcasting; bool() of a tensor is defined only for one element;
tensors stay hashable by identity (dict keys, sets)."""
import operator

import numpy as np
import pytest
import tapegrad as tg

A = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
U = np.array([[1.0, 0.0, 3.0], [4.0, 5.0, 9.0]])
ROW = np.array([2.0, 2.0, 6.0])
COMPARISONS = [operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge]


@pytest.mark.parametrize("cmp", COMPARISONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_comparisons_are_elementwise_bool_arrays(cmp, dtype):
    a = tg.tensor(A, dtype=dtype, requires_grad=True)
    u = tg.tensor(U, dtype=dtype)
    cases = [
        (cmp(a, u), cmp(A, U)),                                     # tensor, tensor
        (cmp(a, tg.tensor(ROW, dtype=dtype)), cmp(A, ROW)),         # broadcast
        (cmp(a, 2.0), cmp(A, 2.0)), (cmp(2.0, a), cmp(2.0, A)),     # number, either side
        (cmp(a, 3), cmp(A, 3)), (cmp(a, np.float64(5)), cmp(A, 5.0)),
        (cmp(a, ROW), cmp(A, ROW)), (cmp(ROW, a), cmp(ROW, A)),     # array, either side
    ]
    for got, want in cases:
        assert isinstance(got, np.ndarray) and got.dtype == np.bool_
        np.testing.assert_array_equal(got, want)


def test_equal_values_compare_equal_not_identical_objects():
    a = tg.tensor(A)
    assert (a == tg.tensor(A.copy())).all()
    assert (a == a.detach()).all()
    assert not (a != tg.tensor(A.copy())).any()
    assert (tg.tensor(np.float64(3.0)) == 3.0).item() is True
    # an object that is no number, array or tensor is simply unequal, as in Python
    assert (a == "a") is False and (a != None) is True  # noqa: E711


def test_comparing_shapes_that_do_not_broadcast_is_a_shape_error():
    a = tg.tensor(A)
    with pytest.raises(tg.ShapeError, match=r"equal.*\(2,3\).*\(4\)"):
        a == tg.tensor(np.ones(4))
    with pytest.raises(tg.ShapeError, match=r"less.*\(2,3\).*\(2\)"):
        a < np.ones(2)
    with pytest.raises(TypeError):
        a < "a"


def test_truth_value_only_of_one_element():
    with pytest.raises(TypeError, match=r"\(2,3\).*ambiguous"):
        bool(tg.tensor(A))
    with pytest.raises(TypeError, match="ambiguous"):
        bool(tg.tensor(np.zeros((0, 3))))
    assert bool(tg.tensor(np.array(2.5))) is True
    assert bool(tg.tensor(np.array([[0.0]]))) is False


def test_tensors_hash_by_identity():
    a, b = tg.tensor(A), tg.tensor(A)
    seen = {a: "a", b: "b"}
    assert seen[a] == "a" and seen[b] == "b"
    assert len({a, b, a}) == 2
    assert a in [a] and a in {a}
