"""The attention pieces below attention() and the KV cache from Python: the fused path's two
halves, the scores, flash by name, the cache with forward(tokens, cache), attention_decode
reading a cache in place, generate's prefill_chunk. Each is checked against a NumPy
formula or against the whole-sequence path it must equal."""
import numpy as np
import pytest
import tapegrad as tg
from tapegrad import nn

SPEC = dict(heads=4, kv_heads=2, causal=True, window=3)


def qkv(rng, B=2, Tq=3, Tk=7, H=4, KV=2, dh=5, dtype=np.float64):
    q = rng.standard_normal((B, Tq, H * dh)).astype(dtype)
    k = rng.standard_normal((B, Tk, KV * dh)).astype(dtype)
    v = rng.standard_normal((B, Tk, KV * dh)).astype(dtype)
    return q, k, v


def numpy_scores(q, k, H, KV, scale, window):
    """scale * q.k per head, kv head h // (H // KV), -inf outside the bottom-right window."""
    B, Tq, _ = q.shape
    Tk, dh = k.shape[1], q.shape[2] // H
    qh = q.reshape(B, Tq, H, dh).transpose(0, 2, 1, 3)
    kh = np.repeat(k.reshape(B, Tk, KV, dh).transpose(0, 2, 1, 3), H // KV, axis=1)
    s = scale * qh @ kh.transpose(0, 1, 3, 2)
    pos = Tk - Tq + np.arange(Tq)[:, None]
    gap = pos - np.arange(Tk)[None, :]
    return np.where((gap >= 0) & (gap < window), s, -np.inf)


def test_scores_weights_and_mix_follow_the_formula(rng):
    q, k, v = qkv(rng)
    s = numpy_scores(q, k, 4, 2, 1 / np.sqrt(5), 3)
    Q, K, V = (tg.tensor(a, requires_grad=True) for a in (q, k, v))
    np.testing.assert_allclose(tg.attention_scores(Q, K, **SPEC).numpy(), s, rtol=1e-12)
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    W = tg.attention_weights(Q, K, **SPEC)
    np.testing.assert_allclose(W.numpy(), w, rtol=1e-12, atol=1e-15)
    vh = np.repeat(v.reshape(2, 7, 2, 5).transpose(0, 2, 1, 3), 2, axis=1)
    y = (w @ vh).transpose(0, 2, 1, 3).reshape(2, 3, 20)
    Y = tg.attention_mix(W, V, **SPEC)
    np.testing.assert_allclose(Y.numpy(), y, rtol=1e-12)
    out, _ = tg.attention(Q, K, V, **SPEC)
    np.testing.assert_allclose(Y.numpy(), out.numpy(), rtol=1e-12)


def test_tiled_kv_heads_are_not_what_attention_weights_computes(rng):
    # the porting trap: query head h reading kv head h % KV instead of h // group
    q, k, _ = qkv(rng)
    B, Tq, Tk, dh = 2, 3, 7, 5
    qh = q.reshape(B, Tq, 4, dh).transpose(0, 2, 1, 3)
    kh = np.tile(k.reshape(B, Tk, 2, dh).transpose(0, 2, 1, 3), (1, 2, 1, 1))
    tiled = (qh @ kh.transpose(0, 1, 3, 2)) / np.sqrt(dh)
    got = tg.attention_scores(tg.tensor(q), tg.tensor(k), heads=4, kv_heads=2).numpy()
    assert np.abs(got - tiled).max() > 0.1


def test_weights_and_mix_pass_gradcheck(rng):
    q, k, v = qkv(rng, B=1, Tq=3, Tk=5, dh=3)
    ts = [tg.tensor(a, requires_grad=True) for a in (q, k, v)]

    def f(xs):
        w = tg.attention_weights(xs[0], xs[1], **SPEC)
        return tg.sum(tg.attention_mix(w, xs[2], **SPEC) * tg.attention_mix(w, xs[2], **SPEC))
    r = tg.gradcheck(f, ts)
    assert r.passed, str(r)


def test_flash_attention_by_name_equals_the_fused_path(rng):
    q, k, v = qkv(rng, Tq=7)
    Q, K, V = (tg.tensor(a) for a in (q, k, v))
    flash = tg.flash_attention(Q, K, V, **SPEC)
    fused, _ = tg.attention(Q, K, V, **SPEC)
    np.testing.assert_allclose(flash.numpy(), fused.numpy(), rtol=1e-12)


def test_attention_mix_refuses_weights_of_another_shape(rng):
    q, k, v = qkv(rng)
    W = tg.attention_weights(tg.tensor(q), tg.tensor(k), **SPEC)
    with pytest.raises(tg.ShapeError, match="attention_mix"):
        tg.attention_mix(W, tg.tensor(v[:, :5]), **SPEC)
    with pytest.raises(tg.ShapeError, match="attention_mix"):
        tg.attention_mix(W, tg.tensor(v), heads=2)


def llama(window=0):
    return nn.Config.preset("llama", vocab=13, context=16, d_model=16, heads=4, layers=2,
                            seed=3, window=window)


@pytest.mark.parametrize("window", [0, 4])
def test_cached_forward_in_chunks_equals_the_whole_sequence(window):
    model = nn.Transformer(llama(window), dtype="float64")
    tokens = np.array([[1, 5, 2, 7, 3, 9, 4, 11, 6, 0], [2, 2, 8, 1, 12, 5, 3, 3, 7, 10]])
    full = model(tokens).numpy()
    cache = model.kv_cache(batch=2)
    parts = []
    with tg.no_grad():
        for a, b in ((0, 3), (3, 4), (4, 8), (8, 9), (9, 10)):
            parts.append(model.forward(tokens[:, a:b], cache=cache).numpy())
    assert cache.length == 10 and len(cache) == 2
    np.testing.assert_allclose(np.concatenate(parts, axis=1), full, rtol=1e-10, atol=1e-12)
    if window:
        assert cache[0].count == 4 and cache[0].first_position == 6


def test_attention_decode_reads_the_cache_like_attention_reads_its_last_row(rng):
    B, H, KV, dh, n = 2, 4, 2, 4, 9  # the llama config: 4 heads of 4, 2 kv heads
    cache = nn.Transformer(llama(), dtype="float64").kv_cache(batch=B)[0]
    assert cache.capacity == 16
    k = rng.standard_normal((B, n, KV * dh))
    v = rng.standard_normal((B, n, KV * dh))
    cache.append(tg.tensor(k), tg.tensor(v))
    np.testing.assert_array_equal(cache.keys().numpy(), k)
    q = rng.standard_normal((B, 1, H * dh))
    for window in (0, 3):
        got = tg.attention_decode(tg.tensor(q), cache, heads=H, kv_heads=KV, window=window)
        want, _ = tg.attention(tg.tensor(q), tg.tensor(k), tg.tensor(v), heads=H, kv_heads=KV,
                               causal=True, window=window)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-12)
    with pytest.raises(tg.ShapeError, match="float32 tensor for a float64 cache"):
        tg.attention_decode(tg.tensor(q.astype(np.float32)), cache, heads=H, kv_heads=KV)
    with pytest.raises(tg.ShapeError, match="attention_decode"):
        tg.attention_decode(tg.tensor(np.zeros((B, 2, H * dh))), cache, heads=H, kv_heads=KV)


def test_generate_with_prefill_chunks_equals_one_prefill():
    model = nn.Transformer(llama(), dtype="float64")
    prompt = [1, 4, 2, 8, 5, 7, 3]
    one = model.generate(prompt, 5, temperature=0)
    for chunk in (1, 2, 3):
        assert model.generate(prompt, 5, temperature=0, prefill_chunk=chunk) == one
    assert model.generate(prompt, 5, temperature=0, use_cache=False) == one
    assert tg.num_threads() >= 1


def bf16(x):
    """float32 -> bfloat16 -> float32, round to nearest even (finite x)."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.astype(np.uint32).view(np.float32)


def test_a_bf16_cache_holds_rounded_keys_in_half_the_bytes(rng):
    B, H, KV, dh, n = 2, 4, 2, 4, 9
    model = nn.Transformer(llama(), dtype="float32")
    wide, narrow = model.kv_cache(batch=B), model.kv_cache(batch=B, kv_dtype="bf16")
    assert narrow[0].kv_dtype == "bf16" and wide[0].kv_dtype == "f32"
    assert 2 * narrow.bytes == wide.bytes
    k = rng.standard_normal((B, n, KV * dh)).astype(np.float32)
    v = rng.standard_normal((B, n, KV * dh)).astype(np.float32)
    narrow[0].append(tg.tensor(k), tg.tensor(v))
    np.testing.assert_array_equal(narrow[0].keys().numpy(), bf16(k))
    assert np.abs(narrow[0].keys().numpy() - k).max() > 0  # rounded, not stored as given
    q = rng.standard_normal((B, 1, H * dh)).astype(np.float32)
    got = tg.attention_decode(tg.tensor(q), narrow[0], heads=H, kv_heads=KV)
    want, _ = tg.attention(tg.tensor(q), tg.tensor(bf16(k)), tg.tensor(bf16(v)), heads=H,
                           kv_heads=KV, causal=True)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    prompt = [1, 4, 2, 8, 5, 7, 3]
    assert len(model.generate(prompt, 5, temperature=0, kv_dtype="bf16")) == 5
    with pytest.raises(tg.ShapeError, match="bf16 storage is for float32 models"):
        nn.Transformer(llama(), dtype="float64").kv_cache(kv_dtype="bf16")
    with pytest.raises(tg.ShapeError, match="'fp8'"):
        model.kv_cache(kv_dtype="fp8")
