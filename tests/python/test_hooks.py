"""Hook points from Python: run_with_cache (a dict of NumPy arrays, gradients on request)
and run_with_hooks (read, replace with an array or a Tensor on the tape)."""
import numpy as np
import pytest
import tapegrad as tg
from tapegrad import nn


def small(preset="gpt2", **kw):
    fields = dict(vocab=9, context=6, d_model=8, heads=2, layers=2, mlp_hidden=12, seed=3)
    fields.update(kw)
    if fields.get("mlp") == "none":
        del fields["mlp_hidden"]  # no feed-forward to size
    return nn.Config.preset(preset, **fields)


TOKENS = np.array([[1, 4, 2, 8, 5, 7]])


def test_cache_holds_every_point_with_its_shape_and_changes_nothing():
    model = nn.Transformer(small("llama", heads=4, kv_heads=2))
    plain = model(TOKENS).numpy()
    logits, cache = tg.run_with_cache(model, TOKENS)
    assert np.array_equal(logits.numpy(), plain)
    assert cache["blocks.1.attn.q"].shape == (1, 6, 4, 2)
    assert cache["blocks.1.attn.k"].shape == (1, 6, 2, 2)
    assert cache["blocks.0.attn.pattern"].shape == (1, 4, 6, 6)
    assert cache["blocks.0.mlp.hidden"].shape == (1, 6, 12)
    assert "pos_embed" not in cache and "embed" in cache and len(cache) == len(list(cache))
    np.testing.assert_allclose(cache["blocks.0.attn.pattern"].sum(-1), 1, rtol=1e-5)
    # the residual stream adds up: resid_post = resid_mid + mlp_out = resid_pre + attn_out + mlp_out
    np.testing.assert_allclose(cache["blocks.0.resid_post"],
                               cache["blocks.0.resid_mid"] + cache["blocks.0.mlp_out"], rtol=1e-6)
    assert np.array_equal(cache["blocks.1.resid_pre"], cache["blocks.0.resid_post"])


def test_names_pick_the_points_and_unknown_names_are_errors():
    model = nn.Transformer(small())
    _, cache = tg.run_with_cache(model, TOKENS, names=["logits", "blocks.0.attn.z"])
    assert sorted(cache.keys()) == ["blocks.0.attn.z", "logits"]
    with pytest.raises(tg.ShapeError, match="^run_with_cache: no hook point named 'blocks.0.attn.zz'"):
        tg.run_with_cache(model, TOKENS, names=["blocks.0.attn.zz"])
    with pytest.raises(tg.ShapeError, match="^run_with_hooks: no hook point named 'nope'"):
        tg.run_with_hooks(model, TOKENS, {"nope": lambda x, name: None})
    with pytest.raises(tg.ShapeError, match="no activation named 'ln_final.out'"):
        cache["ln_final.out"]


def test_hooks_read_and_replace_with_arrays_or_tensors():
    model = nn.Transformer(small(), dtype="float64")
    seen = {}

    def record(x, name):
        seen[name] = x.numpy()

    logits = tg.run_with_hooks(model, TOKENS, {"blocks.0.attn_out": record})
    assert np.array_equal(logits.numpy(), model(TOKENS).numpy())
    assert seen["blocks.0.attn_out"].shape == (1, 6, 8)

    # zero-ablate the first attention layer's output with an array, then with a Tensor op
    zeroed = tg.run_with_hooks(model, TOKENS, {"blocks.0.attn_out": lambda x, n: np.zeros(x.shape)})
    by_op = tg.run_with_hooks(model, TOKENS, {"blocks.0.attn_out": lambda x, n: x * 0.0})
    assert np.array_equal(zeroed.numpy(), by_op.numpy())
    assert not np.allclose(zeroed.numpy(), logits.numpy())
    with pytest.raises(tg.ShapeError, match="blocks.0.attn_out"):
        tg.run_with_hooks(model, TOKENS, {"blocks.0.attn_out": lambda x, n: np.zeros((1, 6, 3))})
    with pytest.raises(TypeError, match="float32"):
        tg.run_with_hooks(model, TOKENS, {"blocks.0.attn_out": lambda x, n: np.zeros(x.shape, np.float32)})


def test_gradient_at_a_cached_activation_matches_finite_differences():
    model = nn.Transformer(small(), dtype="float64")
    weights = np.random.default_rng(0).standard_normal((1, 6, 9))
    logits, cache = tg.run_with_cache(model, TOKENS, names=["blocks.1.attn.pattern"], grads=True)
    tg.sum(logits * weights).backward()
    grad = cache.grad("blocks.1.attn.pattern")
    pattern = cache["blocks.1.attn.pattern"]

    def objective(index, delta):
        def move(x, name):
            moved = x.numpy()
            moved[index] += delta
            return moved
        with tg.no_grad():
            out = tg.run_with_hooks(model, TOKENS, {"blocks.1.attn.pattern": move})
        return float((out.numpy() * weights).sum())

    for index in [(0, 0, 3, 1), (0, 1, 5, 5), (0, 1, 2, 0)]:
        numeric = (objective(index, 1e-6) - objective(index, -1e-6)) / 2e-6
        assert grad[index] == pytest.approx(numeric, rel=1e-6, abs=1e-8)
    assert pattern.shape == grad.shape


def test_direct_logit_attribution_adds_up_in_an_attention_only_rmsnorm_model():
    model = nn.Transformer(small("llama", heads=4, kv_heads=2, mlp="none"), dtype="float64")
    targets = np.array([[4, 2, 8, 5, 7, 1]])
    a = tg.direct_logit_attribution(model, TOKENS, targets)
    assert a["heads"].shape == (2, 4)
    logits = model.forward(TOKENS).numpy()
    want = np.mean([logits[0, t, y] for t, y in enumerate(targets[0])])
    assert a["logit"] == pytest.approx(want, rel=1e-12)
    # only the embedding and the heads wrote into the stream
    assert abs(a["rest"]) < 1e-12 * (abs(a["embed"]) + np.abs(a["heads"]).sum() + abs(a["logit"]))
    with pytest.raises(Exception, match="direct_logit_attribution"):
        tg.direct_logit_attribution(model, TOKENS, targets[:, :3])
    # every target ignored: a mean over no positions, not zeros
    with pytest.raises(tg.ShapeError, match="direct_logit_attribution: every target"):
        tg.direct_logit_attribution(model, TOKENS, np.full_like(targets, -100))


def test_patching_grids_from_python_with_a_python_metric():
    model = nn.Transformer(small(), dtype="float64")
    corrupted = TOKENS.copy()
    corrupted[0, 2] = (TOKENS[0, 2] + 1) % 9

    def last_logit(logits):
        return float(logits.numpy()[0, -1, 0])
    clean_metric = last_logit(model.forward(TOKENS))
    corrupted_metric = last_logit(model.forward(corrupted))
    grid = tg.patch_residual_by_position(model, TOKENS, corrupted, last_logit)
    assert grid.shape == (2, 6)
    # at layer 0 only position 2 differs: patching it restores the clean run
    assert grid[0, 2] == pytest.approx(clean_metric, rel=1e-12)
    assert grid[0, 0] == pytest.approx(corrupted_metric, rel=1e-12)
    heads = tg.patch_heads(model, TOKENS, TOKENS, last_logit)
    assert heads.shape == (2, 2)
    assert np.allclose(heads, clean_metric, rtol=1e-12)


def test_a_metric_that_returns_no_number_is_a_type_error_naming_it():
    model = nn.Transformer(small(), dtype="float64")
    for patch in (tg.patch_heads, tg.patch_residual_by_position):
        with pytest.raises(TypeError, match=patch.__name__ + r": the metric's result must be a "
                           r"number, not str \('x'\)"):
            patch(model, TOKENS, TOKENS, lambda logits: "x")
    # a NumPy number is a number
    grid = tg.patch_heads(model, TOKENS, TOKENS, lambda logits: logits.numpy()[0, -1, 0])
    assert grid.shape == (2, 2)


def test_gemma2_and_bloom_points_from_python():
    """Config.preset('gemma2') and ('bloom') from Python, with their own hook points: the
    residual stream adds the post norms' outputs, and bloom's first block reads ln_embed.out."""
    gemma = nn.Transformer(small("gemma2"), dtype="float64")
    assert gemma.config.norm == "gemma" and gemma.config.window == 3  # context 6 / 2
    logits, cache = tg.run_with_cache(gemma, TOKENS)
    assert np.array_equal(logits.numpy(), gemma(TOKENS).numpy())
    for layer in range(2):
        p = f"blocks.{layer}."
        assert cache[p + "ln1_post.out"].shape == cache[p + "ln2_post.out"].shape == (1, 6, 8)
        np.testing.assert_allclose(cache[p + "resid_mid"],
                                   cache[p + "resid_pre"] + cache[p + "ln1_post.out"], rtol=1e-14)
        np.testing.assert_allclose(cache[p + "resid_post"],
                                   cache[p + "resid_mid"] + cache[p + "ln2_post.out"], rtol=1e-14)
    assert "ln_embed.out" not in cache
    bloom = nn.Transformer(small("bloom"), dtype="float64")
    _, cache = tg.run_with_cache(bloom, TOKENS)
    assert np.array_equal(cache["blocks.0.resid_pre"], cache["ln_embed.out"])
    assert "blocks.0.ln1_post.out" not in cache
    # zeroing the first post norm's output leaves the stream as it entered
    seen = {}
    tg.run_with_hooks(gemma, TOKENS, {
        "blocks.0.ln1_post.out": lambda x, n: np.zeros(x.shape),
        "blocks.0.resid_mid": lambda x, n: seen.__setitem__("mid", x.numpy()),
        "blocks.0.resid_pre": lambda x, n: seen.__setitem__("pre", x.numpy())})
    assert np.array_equal(seen["mid"], seen["pre"])
