"""nn from Python: config and presets, the model, optimisers, schedule, checkpoints,
generation, and the GIL released in long calls."""
import contextlib
import sys
import threading
import time
import warnings

import numpy as np
import pytest
import tapegrad as tg
from tapegrad import nn


def small(**kw):
    return nn.Config(vocab=11, context=8, d_model=16, heads=2, layers=1, **kw)


def test_config_fields_come_from_the_one_list():
    c = nn.Config()
    assert "kv_heads" in nn.Config.fields() and "qk_norm" in nn.Config.fields()
    assert c.norm == "layer" and c.attention_scale is None and c.qk_norm is False
    c.attention_scale = 1.0
    c.norm = "rms"
    assert c.attention_scale == 1.0 and c.norm == "rms"
    llama = nn.Config.preset("llama", vocab=10, context=8, d_model=32, heads=4)
    assert llama.mlp == "swiglu" and llama.positions == "rope" and llama.kv_heads == 2
    assert sorted(nn.Config.preset_names()) == ["bloom", "gemma", "gemma2", "gpt2", "gpt_neo", "llama", "mixtral",
                                               "starcoder2"]
    with pytest.raises(tg.ShapeError, match="norm"):
        c.norm = "batch"


def test_a_field_that_changes_nothing_warns():
    with pytest.warns(UserWarning, match="rope_theta applies to positions=rope only, not positions=learned"):
        nn.Config(vocab=11, context=8, rope_theta=500.0)
    with pytest.warns(UserWarning, match="experts_top_k applies to experts > 0 only"):
        nn.Config.preset("llama", vocab=11, context=8, experts_top_k=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # where the fields apply, nothing is said
        nn.Config.preset("llama", vocab=11, context=8, rope_theta=500.0)
        nn.Config(vocab=11, context=8, experts=4, experts_top_k=1, qk_norm=True, qk_norm_gain=2.0)


def test_count_parameters_matches_the_model():
    for cfg in (small(), nn.Config.preset("llama", vocab=11, context=8, d_model=16, heads=2, layers=1)):
        model = nn.Transformer(cfg)
        assert cfg.count_parameters() == model.parameter_count() == sum(p.size for p in model.parameters())


def test_model_forward_loss_and_gradcheck_in_float64():
    model = nn.Transformer(small(), dtype="float64")
    tokens = np.array([[1, 2, 3, 4], [5, 6, 7, 8]])
    logits = model(tokens)
    assert logits.shape == (2, 4, 11) and logits.dtype == "float64"
    targets = np.array([[2, 3, 4, -100], [6, 7, 8, 9]])
    loss = model.loss(tokens, targets)
    ref = tg.cross_entropy(logits, targets).item()
    assert abs(loss.item() - ref) < 1e-12
    params = model.parameters()
    r = tg.gradcheck(lambda _: model.loss(tokens, targets), params, max_elements=3)
    assert r.passed, str(r)


def test_model_loss_in_chunks_of_rows_matches_the_unchunked_loss():
    model = nn.Transformer(small(tie_embeddings=True, final_softcap=3.0), dtype="float64")
    tokens = np.arange(2 * 8).reshape(2, 8) % 11
    targets = (tokens + 1) % 11
    targets[0, :5] = -100
    results = []
    for chunk_rows in (16, 0, None):  # 16 rows: one chunk of the 16; then 0, None: all at once
        loss = model.loss(tokens, targets, chunk_rows=chunk_rows)
        loss.backward()
        results.append((loss.item(), [p.grad.copy() for p in model.parameters()]))
        model.zero_grad()
    small_chunks = model.loss(np.tile(tokens, (3, 1)), np.tile(targets, (3, 1)), chunk_rows=16)
    for value, grads in results[1:]:
        assert abs(value - results[0][0]) < 1e-13
        for g, g0 in zip(grads, results[0][1]):
            np.testing.assert_allclose(g, g0, rtol=0, atol=1e-13)
    # 48 rows in three chunks: the mean over the repeated batch is the same loss
    assert abs(small_chunks.item() - results[0][0]) < 1e-13
    assert model.training_loss(tokens, targets, chunk_rows=16)["lm"].item() == pytest.approx(results[0][0], abs=1e-13)


def test_checkpoint_activations_gives_the_same_gradients_and_is_not_saved(tmp_path):
    tokens = np.arange(2 * 8).reshape(2, 8) % 11
    targets = (tokens * 3 + 1) % 11
    grads = []
    for on in (True, False):
        model = nn.Transformer(nn.Config(vocab=11, context=8, d_model=16, heads=2, layers=2,
                                         checkpoint_activations=on), dtype="float64")
        assert model.checkpoint_activations is on and model.config.checkpoint_activations is on
        model.loss(tokens, targets).backward()
        grads.append([p.grad.copy() for p in model.parameters()])
    for a, b in zip(*grads):
        np.testing.assert_array_equal(a, b)
    # a loaded model takes it too; the file does not hold it
    model.save(str(tmp_path / "m.npz"))
    loaded = nn.load_checkpoint(str(tmp_path / "m.npz"), dtype="float64")
    assert loaded.checkpoint_activations is False
    loaded.checkpoint_activations = True
    assert loaded.config.checkpoint_activations is True
    moe = nn.Transformer(nn.Config.preset("mixtral", vocab=11, context=8, d_model=16, heads=2, layers=1))
    with pytest.raises(tg.ShapeError, match="checkpoint_activations"):
        moe.checkpoint_activations = True


def test_adamw_matches_the_formula():
    p0 = np.array([1.0, -2.0])
    p = tg.tensor(p0, requires_grad=True)
    opt = nn.AdamW([p], lr=0.1, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    tg.sum(p * p).backward()
    g = 2 * p0
    opt.step()
    m, v = 0.1 * g, 0.001 * g * g
    expect = p0 * (1 - 0.1 * 0.01) - 0.1 / 0.1 * m / (np.sqrt(v) / np.sqrt(0.001) + 1e-8)
    np.testing.assert_allclose(p.numpy(), expect, rtol=1e-12)


def test_clip_and_schedule():
    p = tg.tensor(np.array([3.0, 4.0]), requires_grad=True)
    tg.sum(p * tg.tensor(np.array([3.0, 4.0]))).backward()
    assert abs(nn.clip_grad_norm([p], 1.0) - 5.0) < 1e-12
    np.testing.assert_allclose(np.linalg.norm(p.grad), 1.0, rtol=1e-5)
    s = nn.WarmupCosine(1.0, 0.1, 10, 110)
    assert s(0) == pytest.approx(0.1) and s(9) == pytest.approx(1.0)
    assert s(60) == pytest.approx(0.55) and s(200) == pytest.approx(0.1)
    with pytest.raises(tg.ShapeError):
        nn.WarmupCosine(0.1, 1.0, 10, 100)


def test_checkpoint_round_trip_and_architecture_check(tmp_path):
    model = nn.Transformer(small(seed=3))
    path = str(tmp_path / "m.npz")
    model.save(path)
    back = nn.load_checkpoint(path)
    assert back.config == model.config
    tokens = np.array([[1, 2, 3]])
    np.testing.assert_array_equal(back(tokens).numpy(), model(tokens).numpy())
    loaded = np.load(path)
    assert loaded["tok_emb.weight"].shape == (11, 16)
    other = nn.Transformer(nn.Config(vocab=11, context=8, d_model=32, heads=2, layers=1))
    with pytest.raises(tg.CheckpointError, match="d_model"):
        other.load(path)
    # a float32 file widens exactly into a float64 model
    wide = nn.load_checkpoint(path, dtype="float64")
    np.testing.assert_allclose(wide(tokens).numpy(), model(tokens).numpy(), rtol=1e-5, atol=1e-6)


def test_generate_greedy_is_argmax_and_sampling_is_seeded():
    model = nn.Transformer(small(seed=1))
    prompt = [1, 2, 3]
    out = model.generate(prompt, max_new_tokens=3, temperature=0)
    seq = list(prompt)
    for _ in range(3):
        seq.append(int(np.argmax(model(np.array([seq])).numpy()[0, -1])))
    assert out == seq[3:]
    a = model.generate(prompt, 4, temperature=1.0, top_k=5, top_p=0.9, seed=7)
    b = model.generate(prompt, 4, temperature=1.0, top_k=5, top_p=0.9, generator=tg.Generator(7))
    assert a == b and len(a) == 4
    # Stops when the sequence fills the context of 8: the last token is drawn from the
    # logits at position 8 and never fed back, so 8 - 3 + 1 new tokens.
    with pytest.warns(UserWarning, match="context"):
        assert len(model.generate(prompt, 20, temperature=0)) == 6
    with pytest.raises(tg.ShapeError, match="top-p"):
        model.generate(prompt, 2, top_p=0.0)


def test_generate_arguments_that_change_nothing_warn():
    model = nn.Transformer(small(seed=1))
    prompt = [1, 2, 3]
    greedy = model.generate(prompt, 3, temperature=0)
    with pytest.warns(UserWarning, match="top_k applies to sampling only, and temperature=0 is greedy"):
        assert model.generate(prompt, 3, temperature=0, top_k=2) == greedy
    with pytest.warns(UserWarning, match="prefill_chunk applies to the KV cache only"):
        assert model.generate(prompt, 3, temperature=0, use_cache=False, prefill_chunk=2) == greedy
    with pytest.warns(UserWarning, match="kv_dtype applies to the KV cache only"):
        model.generate(prompt, 3, temperature=0, use_cache=False, kv_dtype="bf16")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # arguments that apply say nothing
        model.generate(prompt, 3, temperature=0.5, top_k=2, top_p=0.9, prefill_chunk=2)


def test_generate_warns_once_when_it_stops_at_the_context():
    model = nn.Transformer(small(seed=1))  # context 8
    prompt = [1, 2, 3]
    for use_cache in (True, False):
        with pytest.warns(UserWarning) as record:
            assert len(model.generate(prompt, 20, temperature=0, use_cache=use_cache)) == 6
        messages = [str(w.message) for w in record]
        assert len(messages) == 1, messages
        assert ("generate: stopped after 6 of 20 new tokens: the context of 8 positions is "
                "full (a prompt of 3 tokens); at_context='slide' goes on, re-reading the newest "
                "4 tokens each time the context fills") in messages[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # what fits, and a model that slides, say nothing
        assert len(model.generate(prompt, 6, temperature=0)) == 6
        assert len(model.generate(prompt, 20, temperature=0, at_context="slide")) == 20


@contextlib.contextmanager
def gil_changes_hands_only_when_released():
    """With a switch interval of 1000 s, the interpreter never takes the GIL from this
    thread by itself: another Python thread runs only while this one blocks or a C call
    has released the GIL. What another thread managed to do then says which it was,
    whatever the scheduler does."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1000.0)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def another_thread_ran_during(call, max_calls, timeout=60.0):
    """Whether a thread woken just before `call`, which needs the GIL to finish, finished
    during one of up to `max_calls` calls (stopping at the first call it finished in, or
    after `timeout` seconds). It finishes in any case afterwards, or the test fails."""
    woken, finished = threading.Event(), threading.Event()

    def wake_then_finish():
        woken.wait()
        finished.set()

    thread = threading.Thread(target=wake_then_finish)
    with gil_changes_hands_only_when_released():
        thread.start()
        woken.set()  # the thread now waits only for the GIL
        deadline = time.monotonic() + timeout
        for _ in range(max_calls):
            call()
            if finished.is_set() or time.monotonic() > deadline:
                break
        during = finished.is_set()
    thread.join(timeout)
    assert finished.is_set(), "the other thread never ran, even after the calls"
    return during


def test_long_calls_release_the_gil():
    x = tg.tensor(np.random.default_rng(0).standard_normal((128, 128)), requires_grad=True)
    y = x
    for _ in range(10):
        y = tg.tanh(y @ x) * 0.5
    loss = tg.sum(y)
    assert another_thread_ran_during(lambda: loss.backward(retain_graph=True), max_calls=10_000)
    model = nn.Transformer(small())
    tokens = np.array([[1, 2, 3, 4]])
    assert another_thread_ran_during(lambda: model(tokens), max_calls=10_000)
    # The contrast, and the check that a call is seen: time.sleep releases the GIL too.
    assert another_thread_ran_during(lambda: time.sleep(0.001), max_calls=10_000)


def test_single_ops_hold_the_gil():
    # One op keeps the GIL (too short to be worth releasing it): however long the matmul,
    # the woken thread cannot finish before the calls return.
    big = tg.tensor(np.ones((400, 400)))
    assert not another_thread_ran_during(lambda: tg.matmul(big, big), max_calls=3)
    assert not another_thread_ran_during(lambda: tg.tanh(big) * 2.0 + big, max_calls=3)
