"""Arguments of the wrong type: NumPy's dtype spellings are accepted wherever a dtype is
taken, and anything else of the wrong type is a TypeError naming the argument (or config
field) and the type it got, never pybind11's C++ cast message. A configuration error names
the field that is actually wrong."""
import numpy as np
import pytest
import tapegrad as tg
from tapegrad import nn, tasks

DTYPE_SPELLINGS = [("float32", "float32"), (np.float32, "float32"), (np.dtype("float32"), "float32"),
                   ("float64", "float64"), (np.float64, "float64"), (np.dtype("float64"), "float64")]


@pytest.mark.parametrize("dtype, name", DTYPE_SPELLINGS, ids=repr)
def test_numpy_dtypes_are_accepted_everywhere(dtype, name):
    assert tg.tensor(np.arange(3), dtype=dtype).dtype == name
    assert tg.zeros((2,), dtype=dtype).dtype == name
    assert tg.ones((2,), dtype=dtype).dtype == name
    assert tg.full((2,), 1.5, dtype=dtype).dtype == name
    assert tg.randn((2,), tg.Generator(0), dtype=dtype).dtype == name
    assert tg.uniform((2,), tg.Generator(0), dtype=dtype).dtype == name
    assert tg.tensor(np.ones(2)).astype(dtype).dtype == name
    assert isinstance(tg.live_tensors(dtype), int)
    assert isinstance(tg.tape_string(dtype), str) and isinstance(tg.tape_size(dtype), int)
    model = nn.Transformer(nn.Config(vocab=5, context=4, d_model=8, heads=2, layers=1), dtype=dtype)
    assert model.dtype == name


@pytest.mark.parametrize("bad", [np.int8, "int8", np.dtype("float16"), "float", 3],
                         ids=lambda b: repr(b))
def test_other_dtypes_are_a_type_error_naming_the_dtype_argument(bad):
    for make in (lambda: tg.tensor(np.ones(2), dtype=bad), lambda: tg.zeros((2,), dtype=bad),
                 lambda: tg.tape_size(bad), lambda: tg.tensor(np.ones(2)).astype(bad),
                 lambda: nn.Transformer(nn.Config(vocab=5, context=4), dtype=bad)):
        with pytest.raises(TypeError, match=r"dtype must be .*float32.*float64"):
            make()


@pytest.mark.parametrize("field, value, got", [
    ("d_model", 1.5, "float"), ("layers", "2", "str"), ("heads", None, "NoneType"),
    ("seed", 0.5, "float"), ("norm", 3, "int"), ("qk_norm", "yes", "str"),
    ("norm_eps", "small", "str"), ("attention_scale", "x", "str"), ("vocab", True, "bool"),
    ("qk_norm", 1.0, "float"),
])
def test_a_config_field_of_the_wrong_type_names_the_field_and_the_type(field, value, got):
    with pytest.raises(TypeError, match=rf"config: {field} must be .*, not {got}\b"):
        nn.Config(**{field: value})
    c = nn.Config()
    with pytest.raises(TypeError, match=rf"config: {field} must be .*, not {got}\b"):
        setattr(c, field, value)


def test_config_accepts_numpy_numbers():
    c = nn.Config(d_model=np.int64(32), norm_eps=np.float32(1e-6), qk_norm=np.bool_(True),
                  seed=np.uint64(7))
    assert (c.d_model, c.qk_norm, c.seed) == (32, True, 7)
    assert c.norm_eps == pytest.approx(1e-6)


def test_a_negative_seed_names_the_seed():
    with pytest.raises(ValueError, match="seed"):
        nn.Config(seed=-1)


def test_the_config_error_names_the_wrong_field_not_a_missing_default():
    # context is not given (it has no default) and d_model does not split into 4 heads:
    # both are named, the heads problem first.
    with pytest.raises(tg.ShapeError, match=r"d_model=30 is not divisible by heads=4.*context"):
        nn.Transformer(nn.Config(vocab=11, d_model=30, heads=4))
    with pytest.raises(tg.ShapeError, match=r"d_model=30 is not divisible by heads=4.*context"):
        nn.Config(vocab=11, d_model=30, heads=4).validate()
    # only the missing field: it is named as missing, not as a bad value
    with pytest.raises(tg.ShapeError, match=r"context is not set"):
        nn.Transformer(nn.Config(vocab=11, d_model=32, heads=4))
    # a complete configuration reports exactly the bad combination
    with pytest.raises(tg.ShapeError, match=r"^config: d_model=30 is not divisible by heads=4 \(or set head_dim\)$"):
        nn.Transformer(nn.Config(vocab=11, context=8, d_model=30, heads=4))


def test_evaluate_names_the_model_argument_and_its_type():
    task = tasks.SequenceTask("sort")
    cfg = nn.Config(vocab=task.vocab_size, context=task.context, d_model=16, heads=2, layers=1)
    batches = tasks.held_out(task, size=4, batch=4)
    with pytest.raises(TypeError, match=r"evaluate: model must be a float32 Transformer.*not Transformer_float64"):
        tasks.evaluate(nn.Transformer(cfg, dtype="float64"), batches)
    with pytest.raises(TypeError, match=r"evaluate: batches must be .*, not str"):
        tasks.evaluate(nn.Transformer(cfg), "batches")
    assert tasks.evaluate(nn.Transformer(cfg), batches).sequences == 4


def test_matmul_and_linear_take_numpy_arrays_as_the_operators_do():
    rng = np.random.default_rng(0)
    x = tg.tensor(rng.standard_normal((3, 4)), requires_grad=True)
    w, b = rng.standard_normal((4, 5)), rng.standard_normal(5)
    w_nt, left = rng.standard_normal((5, 4)), rng.standard_normal((2, 3))
    np.testing.assert_array_equal(tg.matmul(x, w).numpy(), (x @ w).numpy())
    np.testing.assert_array_equal(tg.matmul(left, x).numpy(), (left @ x).numpy())
    np.testing.assert_array_equal(tg.matmul_nt(x, w_nt).numpy(), (x @ w_nt.T).numpy())
    np.testing.assert_allclose(tg.linear(x, w, b).numpy(), (x @ w + b).numpy(), rtol=1e-6)
    # a missing bias, as C++ takes it: x @ w
    np.testing.assert_array_equal(tg.linear(x, w).numpy(), (x @ w).numpy())
    np.testing.assert_array_equal(tg.linear(x, w, None).numpy(), (x @ w).numpy())
    targets = np.array([0, 4, 2])
    loss = tg.linear_cross_entropy(x, w, targets)
    want = tg.cross_entropy(x @ w, targets)
    np.testing.assert_allclose(loss.numpy(), want.numpy(), rtol=1e-12)


def test_matmul_and_linear_name_the_argument_of_the_wrong_type():
    x = tg.tensor(np.ones((2, 3)))
    w = np.ones((3, 4))
    with pytest.raises(TypeError, match=r"linear: bias must be a tapegrad.Tensor or a NumPy array, not str"):
        tg.linear(x, w, "zero")
    with pytest.raises(TypeError, match=r"linear: weight must be a tapegrad.Tensor or a NumPy array, not list"):
        tg.linear(x, [[1.0]])
    with pytest.raises(TypeError, match=r"linear: x must be a tapegrad.Tensor \(a NumPy array is taken beside one\)"):
        tg.linear(np.ones((2, 3)), w)
    with pytest.raises(TypeError, match=r"matmul: the operand beside the tensor must be .*, not list"):
        tg.matmul(x, [[1.0]])
    with pytest.raises(TypeError, match=r"matmul_nt: at least one operand must be a tapegrad.Tensor"):
        tg.matmul_nt(w, w)
    with pytest.raises(TypeError, match=r"linear_cross_entropy: weight must be"):
        tg.linear_cross_entropy(x, "w", np.array([0, 1]))
    with pytest.raises(TypeError, match=r"linear_cross_entropy: chunk_rows must be an integer .*, not float"):
        tg.linear_cross_entropy(x, w, np.array([0, 1]), chunk_rows=1.5)
    with pytest.raises(tg.ShapeError, match=r"linear_cross_entropy: chunk_rows must be 0 \(a default\) "
                                              r"or a number of rows, not -1"):
        tg.linear_cross_entropy(x, w, np.array([0, 1]), chunk_rows=-1)
