"""tapegrad's errors as Python exceptions, message kept."""
import numpy as np
import pytest
import tapegrad as tg


def test_shape_error_is_a_value_error_naming_op_and_shapes():
    assert issubclass(tg.ShapeError, ValueError)
    a, b = tg.tensor(np.ones((2, 3))), tg.tensor(np.ones((4, 5)))
    with pytest.raises(tg.ShapeError, match=r"matmul.*\(2,3\).*\(4,5\)"):
        a @ b
    with pytest.raises(ValueError, match="multi_head_attention: D=6 is not divisible by heads=4"):
        x = tg.tensor(np.ones((1, 3, 6)))
        w = tg.tensor(np.ones((6, 6)))
        tg.multi_head_attention(x, w, w, w, w, heads=4)


def test_mixing_dtypes_is_refused_not_converted():
    with pytest.raises(tg.ShapeError, match="add: a float32 tensor .* and a float64 tensor"):
        tg.tensor(np.ones(2, np.float32)) + tg.tensor(np.ones(2))


def test_masks_must_be_bool_and_ids_integers():
    x = tg.tensor(np.ones((2, 2)))
    with pytest.raises(TypeError, match="masked_softmax: a mask must be a bool array"):
        tg.masked_softmax(x, np.ones((2, 2)))
    with pytest.raises(TypeError, match="embedding: token ids must be an integer array"):
        tg.embedding(x, np.array([0.0, 1.0]))
    with pytest.raises(tg.ShapeError, match="embedding"):
        tg.embedding(x, np.array([5]))


def test_graph_error_on_second_backward():
    x = tg.tensor(np.ones(3), requires_grad=True)
    y = tg.sum(tg.tanh(x))
    y.backward()
    with pytest.raises(tg.GraphError):
        y.backward()
    assert issubclass(tg.GraphError, RuntimeError)


def test_anomaly_mode_names_the_op():
    x = tg.tensor(np.array([-1.0, 4.0]), requires_grad=True)
    y = tg.log(x)  # NaN at -1, but nothing says so outside anomaly mode
    assert np.isnan(y.numpy()[0])
    with tg.detect_anomaly():
        assert tg.anomaly_mode()
        with pytest.raises(tg.AnomalyError, match="log"):
            tg.log(x)
    assert not tg.anomaly_mode()


def test_no_grad_records_nothing_and_restores():
    x = tg.tensor(np.ones(3), requires_grad=True)
    before = tg.tape_size("float64")
    with tg.no_grad():
        assert not tg.grad_enabled()
        y = tg.tanh(x)
    assert tg.grad_enabled()
    assert tg.tape_size("float64") == before
    assert not y.requires_grad


def test_tape_printer_shows_op_and_shapes():
    tg.clear_tape()
    x = tg.tensor(np.ones((2, 3)), requires_grad=True)
    w = tg.tensor(np.ones((3, 4)), requires_grad=True)
    y = x @ w
    # each input named by where it comes from: a node number, or leaf / constant
    assert "matmul leaf (2,3), leaf (3,4) -> (2,4)" in tg.tape_string("float64")
    del y


def test_checkpoint_errors(tmp_path):
    with pytest.raises(OSError, match="cannot open"):
        tg.nn.load_checkpoint(str(tmp_path / "missing.npz"))
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip file")
    with pytest.raises(OSError):
        tg.nn.load_checkpoint(str(bad))
    np.savez(tmp_path / "foreign.npz", w=np.zeros(3))
    with pytest.raises(tg.CheckpointError):
        tg.nn.load_checkpoint(str(tmp_path / "foreign.npz"))
    assert issubclass(tg.CheckpointError, ValueError) and issubclass(tg.NpzError, OSError)


def test_bad_config_names_the_field():
    with pytest.raises(tg.ShapeError, match="heads=6 is not divisible by kv_heads=4"):
        tg.nn.Config(vocab=10, context=8, d_model=48, heads=6, kv_heads=4).validate()
    with pytest.raises(AttributeError):
        tg.nn.Config().no_such_field
    with pytest.raises(TypeError, match="dtype"):
        tg.tensor(np.ones(2), dtype="int8")


def test_slicing_refuses_what_it_cannot_do():
    x = tg.tensor(np.ones((3, 4)))
    with pytest.raises(TypeError, match="only slices"):
        x[0]
    with pytest.raises(tg.ShapeError, match="step 2"):
        x[::2]


def test_a_failed_float32_gradcheck_says_finite_differences_need_float64():
    a = np.random.default_rng(0).standard_normal((4, 4))
    f = lambda xs: tg.tanh(xs[0] @ xs[0])  # noqa: E731
    r32 = tg.gradcheck(f, [tg.tensor(a.astype(np.float32), requires_grad=True)])
    assert not r32.passed
    hint = [line for line in str(r32).splitlines() if "float64" in line]
    assert len(hint) == 1 and "finite differences" in hint[0] and r32.hint == hint[0]
    # float64 passes, and a passing check has nothing to hint
    r64 = tg.gradcheck(f, [tg.tensor(a, requires_grad=True)])
    assert r64.passed and r64.hint == "" and "float64" not in str(r64)
