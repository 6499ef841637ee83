"""Attention checked against NumPy through the Python API: scaled dot-product attention,
the causal mask and multi-head attention, each check aimed at a classic bug (masking with 0
instead of -inf, masking after the softmax, no 1/sqrt(d_k), heads split without the
transpose). Each such bug is implemented here in NumPy and shown to fail the same check."""
import numpy as np
import pytest
import tapegrad as tg

R = np.random.default_rng(5)


def t(a):
    return tg.tensor(np.asarray(a, dtype=np.float64))


def sdpa(q, k, v, mask=None, scale=None):
    out, w = tg.scaled_dot_product_attention(t(q), t(k), t(v), mask=mask, scale=scale)
    return out.numpy(), w.numpy()


def mask_with_zero(q, k, v, mask):  # trap: masked scores set to 0, not -inf
    s = np.where(mask, q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]), 0.0)
    e = np.exp(s - s.max(-1, keepdims=True))
    w = e / e.sum(-1, keepdims=True)
    return w @ v, w


def mask_after_softmax(q, k, v, mask):  # trap: softmax over every key, then zero the masked
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    e = np.exp(s - s.max(-1, keepdims=True))
    w = np.where(mask, e / e.sum(-1, keepdims=True), 0.0)
    return w @ v, w


def test_1_shapes_broadcast_and_rows_sum_to_one():
    q, k, v = R.standard_normal((2, 3, 4, 5)), R.standard_normal((1, 3, 6, 5)), R.standard_normal((2, 1, 6, 7))
    out, w = sdpa(q, k, v)
    assert out.shape == (2, 3, 4, 7) and w.shape == (2, 3, 4, 6)
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-12)


def test_2_scaling_shows_on_the_hand_picked_case():
    q, k, v = np.array([[1.0, 0.0]]), np.array([[1.0, 0.0], [0.0, 1.0]]), np.eye(2)
    assert abs(sdpa(q, k, v)[1][0, 0] - 0.6698) < 1e-4
    assert abs(sdpa(q, k, v, scale=1.0)[1][0, 0] - 0.7311) < 1e-4  # what a missing 1/sqrt(d_k) gives


def test_3_masked_weights_are_exactly_zero():
    q, k, v = R.standard_normal((1, 6, 4)), R.standard_normal((1, 6, 4)), R.standard_normal((1, 6, 3))
    mask = np.array([True, False, True, False, True, False])[None, None, :].repeat(6, 1)
    _, w = sdpa(q, k, v, mask=mask)
    assert np.abs(w[~mask]).max() <= 1e-9
    np.testing.assert_allclose(w.sum(-1), 1.0, atol=1e-12)
    _, w0 = mask_with_zero(q, k, v, mask)
    assert np.abs(w0[~mask]).max() > 1e-3  # the trap leaks exp(0)


def test_4_future_keys_do_not_move_the_past():
    T, pos = 7, 3
    q, k, v = (R.standard_normal((1, T, 4)) for _ in range(3))
    k2, v2 = k.copy(), v.copy()
    k2[:, pos + 1:] += 5 * R.standard_normal(k2[:, pos + 1:].shape)
    v2[:, pos + 1:] += 5 * R.standard_normal(v2[:, pos + 1:].shape)
    m = tg.causal_mask(T)
    a, b = sdpa(q, k, v, mask=m)[0], sdpa(q, k2, v2, mask=m)[0]
    assert np.abs(a[:, pos] - b[:, pos]).max() <= 1e-12
    for trap in (mask_with_zero, mask_after_softmax):
        ta, tb = trap(q, k, v, m)[0], trap(q, k2, v2, m)[0]
        assert np.abs(ta[:, pos] - tb[:, pos]).max() > 1e-6


def test_5_causal_mask_is_j_le_i():
    m = tg.causal_mask(5)
    assert m.dtype == bool
    i, j = np.arange(5)[:, None], np.arange(5)[None, :]
    np.testing.assert_array_equal(m, j <= i)


def test_6_multi_head_matches_the_numpy_formula():
    B, T, D, H = 2, 5, 8, 2
    x = R.standard_normal((B, T, D))
    Wq, Wk, Wv, Wo = (R.standard_normal((D, D)) * 0.4 for _ in range(4))
    split = lambda a: a.reshape(B, T, H, D // H).transpose(0, 2, 1, 3)
    q, k, v = split(x @ Wq), split(x @ Wk), split(x @ Wv)
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(D // H)
    s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    ref = (w @ v).transpose(0, 2, 1, 3).reshape(B, T, D) @ Wo
    got = tg.multi_head_attention(t(x), t(Wq), t(Wk), t(Wv), t(Wo), heads=H, causal=True).numpy()
    np.testing.assert_allclose(got, ref, atol=1e-12)


def test_7_a_fully_masked_row_gives_zeros_not_nan():
    q, k, v = (R.standard_normal((1, 3, 2)) for _ in range(3))
    mask = np.ones((1, 3, 3), bool)
    mask[0, 1] = False
    out, w = sdpa(q, k, v, mask=mask)
    assert np.isfinite(out).all() and (w[0, 1] == 0).all() and (out[0, 1] == 0).all()


def test_8_each_head_reads_only_its_slice():
    B, T, D, H = 1, 4, 4, 2
    block = np.zeros((D, D))
    block[:2, :2] = R.standard_normal((2, 2))
    block[2:, 2:] = R.standard_normal((2, 2))
    x = R.standard_normal((B, T, D))
    x2 = x.copy()
    x2[..., 2:] = 0
    run = lambda a: tg.multi_head_attention(t(a), t(block), t(block.T), t(block * 2), t(np.eye(D)),
                                            heads=H).numpy()
    np.testing.assert_array_equal(run(x)[..., :2], run(x2)[..., :2])

    def forgot_transpose(a):  # trap: heads split without moving the head axis next to batch
        q, k, v = a @ block, a @ block.T, a @ (block * 2)
        r = lambda m: m.reshape(B, H, T, D // H)  # reads across token boundaries
        s = r(q) @ np.swapaxes(r(k), -1, -2) / np.sqrt(D // H)
        w = np.exp(s - s.max(-1, keepdims=True))
        w /= w.sum(-1, keepdims=True)
        return (w @ r(v)).reshape(B, T, D)

    assert np.abs(forgot_transpose(x)[..., :2] - forgot_transpose(x2)[..., :2]).max() > 1e-6
