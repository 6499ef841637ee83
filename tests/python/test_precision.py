"""bf16 matrix products from Python: tapegrad.autocast("bf16") rounds the operands of this
thread's float32 products to bf16 for its block and restores the previous precision."""
import numpy as np
import pytest
import tapegrad as tg


def bf16(a):
    """float32 -> the nearest bfloat16 (ties to even), as float32."""
    u = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def test_autocast_rounds_float32_products_and_restores_the_precision():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((8, 64)).astype(np.float32)
    b = rng.standard_normal((64, 16)).astype(np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    rounded = bf16(a).astype(np.float64) @ bf16(b).astype(np.float64)
    assert tg.matmul_precision() == "f32"
    with tg.autocast("bf16"):
        assert tg.matmul_precision() == "bf16"
        y = tg.matmul(tg.tensor(a), tg.tensor(b)).numpy()
    assert tg.matmul_precision() == "f32"
    scale = np.abs(a) @ np.abs(b)
    # the product of the rounded operands, summed in float32
    assert np.max(np.abs(y - rounded) / scale) < 64 * 2.0**-24
    # and not the float32 product: bf16's rounding is visible
    assert np.max(np.abs(y - exact) / scale) > 1e-4
    f32 = tg.matmul(tg.tensor(a), tg.tensor(b)).numpy()
    assert np.max(np.abs(f32 - exact) / scale) < 64 * 2.0**-24


def test_autocast_leaves_float64_alone_and_rejects_unknown_names():
    a = np.random.default_rng(1).standard_normal((4, 8))
    with tg.autocast("bf16"):
        y = tg.matmul(tg.tensor(a), tg.tensor(a.T)).numpy()
    assert np.allclose(y, a @ a.T, rtol=1e-13, atol=1e-13)
    with pytest.raises(ValueError, match="autocast"):
        tg.autocast("fp8")
    with pytest.raises(ValueError, match="set_matmul_precision"):
        tg.set_matmul_precision("half")
    tg.set_matmul_precision("bfloat16")
    assert tg.matmul_precision() == "bf16"
    tg.set_matmul_precision("float32")
    assert tg.matmul_precision() == "f32"


def test_backward_runs_at_the_precision_its_forward_ran_at():
    """PyTorch's idiom: the forward under autocast, backward() after the block. Each
    product's gradient is computed at the precision its forward ran at, wherever backward
    is called."""
    rng = np.random.default_rng(2)
    a = rng.standard_normal((9, 40)).astype(np.float32)
    b = rng.standard_normal((40, 24)).astype(np.float32)

    def grads(forward, backward):
        x, w = tg.tensor(a, requires_grad=True), tg.tensor(b, requires_grad=True)
        with tg.autocast(forward):
            loss = tg.sum(x * tg.matmul(tg.matmul(x, w), tg.transpose(w)))
        with tg.autocast(backward):
            loss.backward()
        return x.grad, w.grad

    bf16_inside, bf16_outside = grads("bf16", "bf16"), grads("bf16", "f32")
    f32_inside, f32_in_bf16 = grads("f32", "f32"), grads("f32", "bf16")
    for inside, outside in ((bf16_inside, bf16_outside), (f32_inside, f32_in_bf16)):
        for g, h in zip(inside, outside):
            np.testing.assert_array_equal(g, h)  # bitwise
    # and the precisions differ, so the comparison above can fail
    assert np.max(np.abs(bf16_inside[0] - f32_inside[0])) > 0
