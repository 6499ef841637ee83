"""Powers with a tensor exponent where the real power is not defined everywhere: the values
NumPy gives (nan for a negative base and a fractional exponent, inf for 0 to a negative
power) and PyTorch's gradients there (pow_backward_self, pow_backward_exponent):
d/da a^b = b a^(b-1), taken as 0 where b == 0, and d/db a^b = a^b ln a, taken as 0 where
a == 0 and b >= 0 (the limit from a > 0)."""
import numpy as np
import pytest
import tapegrad as tg

BASES = np.array([-2.0, -2.0, -1.5, -1.0, 0.0, 0.0, 0.0, 0.0, 2.0, 0.5])
EXPONENTS = np.array([2.0, 3.0, 0.5, 0.0, 2.0, 0.5, 0.0, -1.0, 0.5, -2.0])


def expected():
    a, b = BASES, EXPONENTS
    with np.errstate(all="ignore"):
        z = np.power(a, b)
        da = np.where(b == 0, 0.0, b * np.power(a, b - 1))
        db = np.where((a == 0) & (b >= 0), 0.0, z * np.log(a))
    return z, da, db


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_tensor_exponent_values_and_gradients_at_zero_and_negative_bases(dtype):
    a = tg.tensor(BASES, requires_grad=True, dtype=dtype)
    b = tg.tensor(EXPONENTS, requires_grad=True, dtype=dtype)
    z = a ** b
    tg.sum(z).backward()
    want_z, want_da, want_db = expected()
    rtol = 1e-12 if dtype == "float64" else 1e-5
    np.testing.assert_allclose(z.numpy(), want_z, rtol=rtol)  # nan where NumPy's is nan
    np.testing.assert_allclose(a.grad, want_da, rtol=rtol)
    np.testing.assert_allclose(b.grad, want_db, rtol=rtol)


def test_number_base_gradient_and_zero_base():
    b = tg.tensor(EXPONENTS, requires_grad=True)
    tg.sum(3.0 ** b).backward()
    np.testing.assert_allclose(b.grad, 3.0 ** EXPONENTS * np.log(3.0), rtol=1e-12)
    b.zero_grad()
    z = 0.0 ** b
    tg.sum(z).backward()
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(z.numpy(), np.power(0.0, EXPONENTS))
    # 0^b is 0 for b > 0, 1 at b == 0 (no slope from the right), inf below: PyTorch's -inf
    want = np.where(EXPONENTS >= 0, 0.0, -np.inf)
    np.testing.assert_array_equal(b.grad, want)


def test_broadcast_exponent_gradient_is_summed_to_its_shape():
    a = tg.tensor(np.full((4, 3), 2.0), requires_grad=True)
    b = tg.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    tg.sum(a ** b).backward()
    assert b.grad.shape == (3,)
    np.testing.assert_allclose(b.grad, 4 * 2.0 ** np.array([1.0, 2.0, 3.0]) * np.log(2.0), rtol=1e-12)
    np.testing.assert_allclose(a.grad, np.tile([1.0, 4.0, 12.0], (4, 1)), rtol=1e-12)


def test_pow_refuses_what_it_cannot_take():
    a = tg.tensor(np.ones((2, 3)))
    with pytest.raises(tg.ShapeError, match=r"pow.*\(2,3\).*\(4\)"):
        a ** tg.tensor(np.ones(4))
    with pytest.raises(TypeError, match="float32"):
        a ** np.ones(3, dtype=np.float32)
    with pytest.raises(TypeError, match="pow"):
        tg.pow(a, "2")
    with pytest.raises(TypeError):
        a ** "2"
