"""Every op from Python: its forward against NumPy written independently here, and its
gradient by tapegrad.gradcheck (central differences in float64)."""
import math

import numpy as np
import pytest
import tapegrad as tg


def t64(a, grad=True):
    return tg.tensor(np.asarray(a, dtype=np.float64), requires_grad=grad)


def gelu_np(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def softmax_np(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


R = np.random.default_rng(1)
A = R.standard_normal((2, 3, 4))
B = R.standard_normal((3, 4))          # broadcasts against A
P = R.uniform(0.5, 2.0, (2, 3, 4))     # positive, for log/sqrt/div
M1 = R.standard_normal((2, 4, 5))
M2 = R.standard_normal((2, 5, 3))

# name, tapegrad function of the inputs, NumPy function, inputs
CASES = [
    ("add", lambda a, b: tg.add(a, b), np.add, [A, B]),
    ("sub", lambda a, b: tg.sub(a, b), np.subtract, [A, B]),
    ("mul", lambda a, b: tg.mul(a, b), np.multiply, [A, B]),
    ("div", lambda a, b: tg.div(a, b), np.divide, [A, P]),
    ("op+-*/", lambda a, b: (a + b) * a - b / (a * a + 1.0), lambda a, b: (a + b) * a - b / (a * a + 1), [A, B]),
    ("scalar ops", lambda a: 2.0 - (3.0 * a + 1.0) / 2.0 * a, lambda a: 2 - (3 * a + 1) / 2 * a, [A]),
    ("rsub rdiv", lambda p: 1.0 / p - 2.0, lambda p: 1 / p - 2, [P]),
    ("neg", lambda a: -a, np.negative, [A]),
    ("pow", lambda p: p ** 3.0, lambda p: p ** 3, [P]),
    ("pow tensor exponent", lambda p, b: p ** b, np.power, [P, B]),
    ("tg.pow tensor exponent", tg.pow, np.power, [P, B]),
    ("pow array exponent", lambda p: p ** B, lambda p: p ** B, [P]),
    ("pow number base", lambda b: 2.0 ** b, lambda b: 2.0 ** b, [B]),
    ("pow array base", lambda b: P ** b, lambda b: P ** b, [B]),
    ("exp", tg.exp, np.exp, [A]),
    ("log", tg.log, np.log, [P]),
    ("sqrt", tg.sqrt, np.sqrt, [P]),
    ("tanh", tg.tanh, np.tanh, [A]),
    ("relu", tg.relu, lambda a: np.maximum(a, 0), [A]),
    ("sigmoid", tg.sigmoid, lambda a: 1 / (1 + np.exp(-a)), [A]),
    ("silu", tg.silu, lambda a: a / (1 + np.exp(-a)), [A]),
    ("gelu", tg.gelu, gelu_np, [A]),
    ("matmul", lambda a, b: a @ b, np.matmul, [M1, M2]),
    ("matmul broadcast", tg.matmul, np.matmul, [M1, M2[0]]),
    ("matmul_nt", tg.matmul_nt, lambda a, b: a @ np.swapaxes(b, -1, -2), [M1, np.swapaxes(M2, -1, -2)]),
    ("linear", tg.linear, lambda x, w, b: x @ w + b, [M1, M2[0], M2[0, 0]]),
    ("reshape", lambda a: tg.reshape(a, [6, 4]), lambda a: a.reshape(6, 4), [A]),
    ("transpose", lambda a: tg.transpose(a, axes=[2, 0, 1]), lambda a: a.transpose(2, 0, 1), [A]),
    ("transpose default", tg.transpose, np.transpose, [A]),
    ("swapaxes", lambda a: tg.swapaxes(a, 0, -1), lambda a: np.swapaxes(a, 0, -1), [A]),
    ("concatenate", lambda a, b: tg.concatenate([a, b], axis=1), lambda a, b: np.concatenate([a, b], 1), [A, A[:, :2]]),
    ("slice", lambda a: tg.slice(a, axis=2, start=1, stop=3), lambda a: a[:, :, 1:3], [A]),
    ("getitem", lambda a: a[:, 1:3], lambda a: a[:, 1:3], [A]),
    ("repeat_interleave", lambda a: tg.repeat_interleave(a, 2, axis=1), lambda a: np.repeat(a, 2, axis=1), [A]),
    ("sum", tg.sum, np.sum, [A]),
    ("sum axes", lambda a: tg.sum(a, axis=[0, 2], keepdims=True), lambda a: a.sum((0, 2), keepdims=True), [A]),
    ("mean", lambda a: tg.mean(a, axis=1), lambda a: a.mean(1), [A]),
    ("max", lambda a: tg.max(a, axis=-1), lambda a: a.max(-1), [A]),
    ("softmax", lambda a: tg.softmax(a, axis=1), lambda a: softmax_np(a, 1), [A]),
    ("log_softmax", tg.log_softmax, lambda a: np.log(softmax_np(a)), [A]),
    ("layer_norm", lambda x, g, b: tg.layer_norm(x, g, b, eps=1e-5),
     lambda x, g, b: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + b,
     [A, R.standard_normal(4), R.standard_normal(4)]),
    ("rms_norm", lambda x, g: tg.rms_norm(x, g, eps=1e-5),
     lambda x, g: x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * g, [A, R.standard_normal(4)]),
]


@pytest.mark.parametrize("name,f,ref,inputs", CASES, ids=[c[0] for c in CASES])
def test_forward_matches_numpy(name, f, ref, inputs):
    out = f(*[t64(x, grad=False) for x in inputs])
    np.testing.assert_allclose(out.numpy(), ref(*inputs), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name,f,ref,inputs", CASES, ids=[c[0] for c in CASES])
def test_gradient_by_gradcheck(name, f, ref, inputs):
    r = tg.gradcheck(lambda xs: f(*xs), [t64(x) for x in inputs])
    assert r.passed, str(r)
    assert all(row.checked > 0 for row in r.inputs)


def test_gradcheck_catches_a_wrong_gradient():
    # relu's derivative used as tanh's: a function whose backward is wrong must fail.
    x = t64(A)
    wrong = lambda xs: tg.relu(xs[0]) * 0.0 + tg.tanh(tg.tensor(xs[0].numpy()))  # detached: zero grad
    r = tg.gradcheck(wrong, [x])
    assert not r.passed and not r.inputs[0].passed


def test_float32_ops_stay_float32():
    a = tg.tensor(A.astype(np.float32))
    assert (tg.tanh(a) @ tg.swapaxes(a, -1, -2)).dtype == "float32"


def test_linear_cross_entropy_against_numpy_and_the_unchunked_ops():
    h = R.standard_normal((2, 25, 6))
    W = R.standard_normal((6, 37))
    targets = R.integers(0, 37, size=(2, 25))
    targets[0, ::4] = -100
    for transposed, cap in ((False, 0.0), (True, 1.5)):
        w = W.T.copy() if transposed else W
        logits = h @ W
        if cap:
            logits = cap * np.tanh(logits / cap)
        keep = targets != -100
        expect = -np.mean(np.log(softmax_np(logits))[keep, targets[keep]])
        hc, wc = t64(h), t64(w)
        loss = tg.linear_cross_entropy(hc, wc, targets, transposed=transposed, softcap=cap,
                                       chunk_rows=16)
        assert abs(loss.item() - expect) < 1e-12
        loss.backward()
        hu, wu = t64(h), t64(w)
        full = tg.matmul_nt(hu, wu) if transposed else tg.matmul(hu, wu)
        if cap:
            full = tg.softcap(full, cap)
        tg.cross_entropy(full, targets).backward()
        np.testing.assert_allclose(hc.grad, hu.grad, rtol=0, atol=1e-14)
        np.testing.assert_allclose(wc.grad, wu.grad, rtol=0, atol=1e-14)


def test_embedding_and_cross_entropy_against_numpy():
    W = R.standard_normal((7, 3))
    ids = np.array([[0, 6, 2], [2, 2, 5]])
    out = tg.embedding(t64(W, grad=False), ids)
    np.testing.assert_array_equal(out.numpy(), W[ids])
    logits = R.standard_normal((2, 3, 7))
    targets = np.array([[1, -100, 3], [6, 0, -100]])
    loss = tg.cross_entropy(t64(logits, grad=False), targets).item()
    keep = targets != -100
    ls = np.log(softmax_np(logits))
    expect = -np.mean(ls[keep, targets[keep]])
    assert abs(loss - expect) < 1e-12
    r = tg.gradcheck(lambda xs: tg.cross_entropy(xs[0], targets), [t64(logits)])
    assert r.passed, str(r)
    r = tg.gradcheck(lambda xs: tg.embedding(xs[0], ids), [t64(W)])
    assert r.passed, str(r)


def test_rope_rotates_pairs_half_and_interleaved():
    x = R.standard_normal((1, 5, 4))
    theta = 10000.0
    inv = theta ** (-np.arange(2) * 2 / 4)
    ang = np.arange(5)[:, None] * inv[None, :]           # (T, 2)
    c, s = np.cos(ang), np.sin(ang)
    half = np.concatenate([x[..., :2] * c - x[..., 2:] * s, x[..., 2:] * c + x[..., :2] * s], -1)
    np.testing.assert_allclose(tg.rope(t64(x, False)).numpy(), half, atol=1e-12)
    inter = x.copy()
    inter[..., 0::2] = x[..., 0::2] * c - x[..., 1::2] * s
    inter[..., 1::2] = x[..., 1::2] * c + x[..., 0::2] * s
    np.testing.assert_allclose(tg.rope(t64(x, False), style="interleaved").numpy(), inter, atol=1e-12)
    assert tg.gradcheck(lambda xs: tg.rope(xs[0], offset=3), [t64(x)]).passed


def test_masked_softmax_and_attention_gradients():
    x = R.standard_normal((2, 4, 4))
    mask = tg.causal_mask(4)
    w = tg.masked_softmax(t64(x, False), mask).numpy()
    np.testing.assert_allclose(w, softmax_np(np.where(mask, x, -np.inf)), atol=1e-12)
    q, k, v = (R.standard_normal((2, 2, 5, 3)) for _ in range(3))
    f = lambda xs: tg.scaled_dot_product_attention(*xs, mask=tg.causal_mask(5))[0]
    assert tg.gradcheck(f, [t64(q), t64(k), t64(v)]).passed
    D = 8
    x = R.standard_normal((2, 5, D))
    Ws = [R.standard_normal((D, D)) * 0.3 for _ in range(4)]
    g = lambda xs: tg.multi_head_attention(*xs, heads=2, causal=True)
    assert tg.gradcheck(g, [t64(x)] + [t64(w) for w in Ws]).passed
    h = lambda xs: tg.attention(xs[0], xs[1], xs[2], heads=4, kv_heads=2, causal=True, window=3)[0]
    qq, kk = R.standard_normal((1, 6, 8)), R.standard_normal((1, 6, 4))
    assert tg.gradcheck(h, [t64(qq), t64(kk), t64(R.standard_normal((1, 6, 4)))]).passed
