"""tg.AttentionSpec: one object for which attention, accepted by every attention function in
place of `heads`, with the same fields and defaults as the keyword arguments; and the two
modifiers it carries (ALiBi, the logit soft-cap) checked against NumPy formulas."""
import numpy as np
import pytest
import tapegrad as tg
from tapegrad import nn

from test_decode import numpy_scores, qkv


def alibi_slopes(H):
    """Hugging Face's build_alibi_tensor slopes, written out: n = the largest power of two
    <= H gets 2^(-8(h+1)/n); the rest take every other slope of 2n."""
    n = 2 ** int(np.floor(np.log2(H)))
    slopes = [2.0 ** (-8.0 * (h + 1) / n) for h in range(n)]
    slopes += [2.0 ** (-4.0 * (2 * r + 1) / n) for r in range(H - n)]
    return np.array(slopes)


def test_the_spec_has_the_keyword_defaults():
    s = tg.AttentionSpec()
    assert (s.heads, s.kv_heads, s.head_dim, s.scale) == (1, 0, 0, None)
    assert (s.causal, s.window, s.bias, s.softcap) == (False, 0, "none", 0.0)
    s = tg.AttentionSpec(4, kv_heads=2, causal=True, window=3, bias="alibi", softcap=20.0)
    assert "bias='alibi'" in repr(s) and "softcap=20" in repr(s)


def test_a_spec_and_the_same_keywords_give_the_same_attention(rng):
    q, k, v = qkv(rng)
    Q, K, V = (tg.tensor(a) for a in (q, k, v))
    spec = tg.AttentionSpec(4, kv_heads=2, causal=True, window=3, bias="alibi", softcap=2.0)
    for path in ("composed", "fused", "flash"):
        by_spec, _ = tg.attention(Q, K, V, spec, path=path)
        by_words, _ = tg.attention(Q, K, V, heads=4, kv_heads=2, causal=True, window=3,
                                   bias="alibi", softcap=2.0, path=path)
        np.testing.assert_array_equal(by_spec.numpy(), by_words.numpy())
    np.testing.assert_array_equal(tg.attention_scores(Q, K, spec).numpy(),
                                  tg.attention_scores(Q, K, heads=4, kv_heads=2, causal=True,
                                                      window=3, bias="alibi", softcap=2.0).numpy())


def test_alibi_and_the_softcap_follow_the_formula(rng):
    H, KV, dh, Tq, Tk = 6, 2, 4, 3, 7
    q, k, _ = qkv(rng, Tq=Tq, Tk=Tk, H=H, KV=KV, dh=dh)
    c = 0.7
    s = numpy_scores(q, k, H, KV, 1 / np.sqrt(dh), Tk)  # causal, no window
    capped = np.where(np.isinf(s), s, c * np.tanh(s / c))
    gap = (Tk - Tq + np.arange(Tq))[:, None] - np.arange(Tk)[None, :]
    want = capped - alibi_slopes(H)[None, :, None, None] * gap
    spec = tg.AttentionSpec(H, kv_heads=KV, causal=True, bias="alibi", softcap=c)
    got = tg.attention_scores(tg.tensor(q), tg.tensor(k), spec).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    # H = 6: 1/4, 1/16, 1/64, 1/256, then 1/2, 1/8 (not 2^-8(h+1)/6, the trap of a wrong n)
    np.testing.assert_allclose(alibi_slopes(6), [1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8])


def test_misuse_is_a_clear_error(rng):
    q, k, v = qkv(rng)
    Q, K, V = (tg.tensor(a) for a in (q, k, v))
    with pytest.raises(TypeError, match="not both"):
        tg.attention(Q, K, V, tg.AttentionSpec(4, kv_heads=2), causal=True)
    with pytest.raises(TypeError, match="heads must be an integer or an AttentionSpec"):
        tg.attention(Q, K, V, "4")
    with pytest.raises(tg.ShapeError, match="ALiBi needs causal"):
        tg.attention(Q, K, V, heads=4, kv_heads=2, bias="alibi")
    with pytest.raises(tg.ShapeError, match="bias must be one of 'none', 'alibi', got"):
        tg.AttentionSpec(4, bias="rope")
    # caps float32 cannot compute c * tanh(s / c) with: refused, not a NaN later
    for cap in (1e-44, 1e39):
        with pytest.raises(tg.ShapeError, match=r"softcap must be 0 \(off\) or in"):
            tg.attention(*(tg.tensor(a.astype(np.float32)) for a in (q, k, v)), heads=4,
                         kv_heads=2, causal=True, softcap=cap)
        with pytest.raises(tg.ShapeError, match=r"final_softcap=.* must be 0 \(off\) or in"):
            nn.Transformer(nn.Config(vocab=11, context=8, d_model=16, heads=2, layers=1,
                                     final_softcap=cap))


def test_the_model_options_reach_python():
    cfg = nn.Config(vocab=11, context=8, d_model=16, heads=2, layers=1, positions="alibi",
                    attn_softcap=30.0, final_softcap=10.0)
    assert (cfg.positions, cfg.attn_softcap, cfg.final_softcap) == ("alibi", 30.0, 10.0)
    model = nn.Transformer(cfg)
    logits = model(np.arange(8, dtype=np.int64).reshape(1, 8)).numpy()
    assert np.all(np.abs(logits) < 10.0)  # the final soft-cap bounds every logit


def test_multi_head_attention_takes_a_spec(rng):
    B, T, D, H, KV, dh = 2, 6, 8, 4, 2, 2
    x = rng.standard_normal((B, T, D))
    Wq, Wo = rng.standard_normal((D, H * dh)), rng.standard_normal((H * dh, D))
    Wk, Wv = rng.standard_normal((D, KV * dh)), rng.standard_normal((D, KV * dh))
    W = [tg.tensor(w) for w in (Wq, Wk, Wv, Wo)]
    spec = tg.AttentionSpec(H, kv_heads=KV, causal=True, window=3, bias="alibi", softcap=2.0)
    got = tg.multi_head_attention(tg.tensor(x), *W, spec).numpy()
    # the same spec by attention() on the projections, then Wo
    out, _ = tg.attention(tg.tensor(x @ Wq), tg.tensor(x @ Wk), tg.tensor(x @ Wv), spec)
    np.testing.assert_allclose(got, out.numpy() @ Wo, rtol=1e-12, atol=1e-12)
    # an integer heads and causal, as before, is the spec of those two
    Wsq = [tg.tensor(rng.standard_normal((D, D))) for _ in range(4)]
    np.testing.assert_array_equal(
        tg.multi_head_attention(tg.tensor(x), *Wsq, heads=2, causal=True).numpy(),
        tg.multi_head_attention(tg.tensor(x), *Wsq, tg.AttentionSpec(2, causal=True)).numpy())
    with pytest.raises(TypeError, match="not both"):
        tg.multi_head_attention(tg.tensor(x), *Wsq, tg.AttentionSpec(2), causal=True)


def test_softcap_is_c_tanh_x_over_c(rng):
    x = rng.standard_normal((3, 4)) * 5
    np.testing.assert_allclose(tg.softcap(tg.tensor(x), 2.0).numpy(), 2.0 * np.tanh(x / 2.0),
                               rtol=1e-14, atol=1e-14)
    with pytest.raises(tg.ShapeError, match="softcap: c must be in"):
        tg.softcap(tg.tensor(x), 0.0)
