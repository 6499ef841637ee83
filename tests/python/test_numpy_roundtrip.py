"""NumPy arrays in and out: dtype kept, every layout read value for value, and every
conversion explicit (pybind11's array_t would convert silently)."""
import numpy as np
import pytest
import tapegrad as tg
from tapegrad._tapegrad import _testing


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (5,), (2, 3), (2, 3, 4)])
def test_round_trip_keeps_values_shape_and_dtype(dtype, shape, rng):
    a = rng.standard_normal(shape).astype(dtype)
    t = tg.tensor(a)
    assert t.dtype == np.dtype(dtype).name
    assert t.shape == shape
    b = t.numpy()
    assert b.dtype == dtype and b.shape == shape
    np.testing.assert_array_equal(b, a)


def test_float64_keeps_digits_float32_would_lose():
    a = np.array([1.0 + 1e-12])
    assert tg.tensor(a).numpy()[0] == a[0]
    assert np.float32(a[0]) == 1.0  # what a silent float32 conversion would have read


def test_0d_item_and_empty_sum():
    assert tg.tensor(np.array(2.5)).item() == 2.5
    assert tg.sum(tg.tensor(np.zeros((0, 3)))).item() == 0.0


@pytest.mark.parametrize("make", [
    lambda a: a.T,                       # Fortran order
    lambda a: a[:, ::2],                 # strided
    lambda a: a[::-1],                   # negative stride
    lambda a: a.astype(a.dtype.newbyteorder(">")),  # big-endian
])
def test_non_contiguous_and_foreign_byte_order_read_value_for_value(make, rng):
    a = make(rng.standard_normal((4, 6)))
    assert not (a.flags.c_contiguous and a.dtype.isnative)
    np.testing.assert_array_equal(tg.tensor(a).numpy(), np.asarray(a, dtype=np.float64))


@pytest.mark.parametrize("bad", [np.arange(3), np.array([True, False]), np.zeros(2, np.float16),
                                 np.zeros(2, np.complex128), [1, 2, 3]])
def test_other_dtypes_are_refused_naming_the_dtype(bad):
    with pytest.raises(TypeError, match="neither float32 nor float64"):
        tg.tensor(bad)


def test_the_class_constructs_as_tensor_does(rng):
    a = rng.standard_normal((2, 3))
    t = tg.Tensor(a, requires_grad=True)
    assert isinstance(t, tg.Tensor) and t.dtype == "float64"
    np.testing.assert_array_equal(t.numpy(), a)
    tg.sum(t * t).backward()
    np.testing.assert_allclose(t.grad, 2 * a)
    assert tg.Tensor(np.arange(3), dtype="float32").dtype == "float32"
    with pytest.raises(TypeError, match="neither float32 nor float64"):
        tg.Tensor(np.arange(3))


def test_conversion_happens_when_asked():
    t = tg.tensor(np.arange(3), dtype="float32")
    assert t.dtype == "float32"
    np.testing.assert_array_equal(t.numpy(), [0, 1, 2])


def test_the_silent_array_t_trap_exists_and_tensor_avoids_it():
    # pybind11's default py::array_t<float> takes an int64 array and a float64 one without a
    # word and hands back float32 values: the digits of 1 + 1e-12 are gone.
    seen = _testing.read_as_array_t_float(np.array([1.0 + 1e-12, 2.0]))
    assert seen == [1.0, 2.0]
    assert _testing.read_as_array_t_float(np.array([7, 8])) == [7.0, 8.0]
    with pytest.raises(TypeError):
        tg.tensor(np.array([7, 8]))
    assert tg.tensor(np.array([1.0 + 1e-12])).numpy()[0] != 1.0


def test_numpy_copy_is_independent_and_view_is_read_only_and_keeps_tensor_alive():
    t = tg.tensor(np.arange(6.0).reshape(2, 3))
    c = t.numpy()
    c[0, 0] = 99
    assert t.numpy()[0, 0] == 0
    v = t.numpy(copy=False)
    assert not v.flags.writeable
    with pytest.raises(ValueError):
        v[0, 0] = 1
    before = tg.live_tensors("float64")
    del t
    assert tg.live_tensors("float64") == before  # the view still holds the tensor
    np.testing.assert_array_equal(v, np.arange(6.0).reshape(2, 3))
    del v
    assert tg.live_tensors("float64") == before - 1


def test_grad_is_numpy_or_none():
    x = tg.tensor(np.array([1.0, 2.0]), requires_grad=True)
    assert x.grad is None
    tg.sum(x * x).backward()
    np.testing.assert_array_equal(x.grad, [2.0, 4.0])


def test_backward_with_a_seed_of_the_wrong_shape_names_it():
    x = tg.tensor(np.ones((2, 3)), requires_grad=True)
    y = x * 2.0
    with pytest.raises(ValueError):
        y.backward(np.ones((3, 2)))
