"""tapegrad's safetensors reader and writer against the reference `safetensors` package:
files it writes (numpy F32/F64/F16, torch BF16) read equal, and files tapegrad writes load
in it with equal values and are byte for byte what it writes itself (name order, header
padding). Skips without the package unless TAPEGRAD_REQUIRE_HF=1."""
import numpy as np
import pytest

from conftest import require_module
from tapegrad import _tapegrad

st_numpy = require_module("safetensors.numpy")


def f16_specials():
    # subnormals, the largest finite, infinities, NaN, -0
    bits = np.array([0x0001, 0x03FF, 0x0400, 0x7BFF, 0x7C00, 0xFC00, 0x7E00, 0x8000, 0x3555],
                    dtype=np.uint16)
    return bits.view(np.float16)


def test_reference_numpy_files_read_equal(tmp_path, rng):
    tensors = {
        "w": rng.standard_normal((3, 5, 7)).astype(np.float32),
        "d": rng.standard_normal((2, 1)),
        "h": f16_specials(),
        "s": np.array(2.5, dtype=np.float32),
        "e": np.zeros((0, 3), dtype=np.float32),
    }
    path = tmp_path / "ref.safetensors"
    st_numpy.save_file(tensors, str(path), metadata={"format": "np"})
    got = _tapegrad.read_safetensors(str(path))
    assert sorted(got) == sorted(tensors)
    for name, want in tensors.items():
        assert got[name].dtype == np.float64
        assert got[name].shape == want.shape, name
        np.testing.assert_array_equal(got[name], want.astype(np.float64), err_msg=name)
    assert np.signbit(got["h"][7])


def test_reference_torch_bf16_reads_exactly(tmp_path):
    torch = require_module("torch")
    st_torch = require_module("safetensors.torch")
    # 1, -2, -0, inf, -inf, the smallest subnormal, 3.140625, NaN
    bits = np.array([0x3F80, 0xC000, 0x8000, 0x7F80, 0xFF80, 0x0001, 0x4049, 0x7FC0],
                    dtype=np.uint16)
    x = torch.from_numpy(bits.view(np.int16)).view(torch.bfloat16).reshape(2, 4)
    path = tmp_path / "bf16.safetensors"
    st_torch.save_file({"x": x}, str(path))
    got = _tapegrad.read_safetensors(str(path))["x"]
    np.testing.assert_array_equal(got, x.float().numpy().astype(np.float64))


@pytest.mark.parametrize("dtype,np_dtype", [("F32", np.float32), ("F64", np.float64)])
def test_tapegrad_files_load_in_reference_and_match_its_bytes(tmp_path, rng, dtype, np_dtype):
    tensors = {
        "zeta": rng.standard_normal((4, 3)).astype(np_dtype),
        "alpha": rng.standard_normal((5,)).astype(np_dtype),
        "mid.bias": np.array(-1.25, dtype=np_dtype),
        "empty": np.zeros((2, 0), dtype=np_dtype),
    }
    ours = tmp_path / "ours.safetensors"
    _tapegrad.write_safetensors(str(ours), tensors, dtype)
    loaded = st_numpy.load_file(str(ours))
    assert sorted(loaded) == sorted(tensors)
    for name, want in tensors.items():
        assert loaded[name].dtype == np_dtype
        np.testing.assert_array_equal(loaded[name], want, err_msg=name)
    theirs = tmp_path / "theirs.safetensors"
    st_numpy.save_file(tensors, str(theirs), metadata={"format": "pt"})
    assert ours.read_bytes() == theirs.read_bytes()


def test_a_file_the_reference_refuses_is_refused(tmp_path):
    path = tmp_path / "trailing.safetensors"
    st_numpy.save_file({"a": np.ones(2, dtype=np.float32)}, str(path))
    path.write_bytes(path.read_bytes() + b"\0\0\0\0")
    with pytest.raises(Exception):
        st_numpy.load_file(str(path))
    with pytest.raises(_tapegrad.SafetensorsError, match="4 trailing bytes"):
        _tapegrad.read_safetensors(str(path))
