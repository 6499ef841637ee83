#!/usr/bin/python3
"""NumPy's side of the npz tests (tests/test_npz.cpp, tag [npz]).

  /usr/bin/python3 tests/check_npz_with_numpy.py make-fixtures tests/fixtures/npz
      Writes the committed fixtures: npz files made by numpy.savez / savez_compressed,
      and damaged or unsupported ones built with Python's zipfile. Not run by CI; its
      output is committed.

  /usr/bin/python3 tests/check_npz_with_numpy.py check FILE
      numpy.load reads FILE (written by tapegrad's save_npz in the test) and checks every
      array against the values computed here, independently of the C++ code. Exit 0 and
      "npz-check: OK" on success, 1 with the differences otherwise.

The values the C++ test expects from numpy_savez.npz (all exact in binary, so the test
compares bit for bit):
  blocks.0.attn.Wq  float32 (2,3)   [[-0.5, -0.25, 0], [0.25, 0.5, 0.75]]
  special           float64 (7,)    [-0.0, inf, -inf, nan, 5e-324, 1.5, -2.25]
  ids               int64   (4,)    [-9223372036854775808, -1, 0, 9223372036854775807]
  scalar            float64 ()      2.5
  fortran           float64 (2,3,4) value at [i,j,k] = 100*i + 10*j + k, Fortran order
  big_endian        >f8     (2,)    [1.5, -2.0]            (read as float64)
  small_ints        <i4     (3,)    [1, -2, 2147483647]     (read as int64)
  flags             |b1     (3,)    [True, False, True]    (read as int64 1, 0, 1)
  empty             float32 (0,3)
  rank4             float32 (2,1,3,2) value at flat index n = n - 5.5
numpy_savez_compressed.npz holds the same arrays, deflated.
"""
import io
import sys
import warnings
import zipfile

import numpy as np


def fixture_arrays():
    fortran = np.zeros((2, 3, 4), dtype=np.float64)
    for i in range(2):
        for j in range(3):
            for k in range(4):
                fortran[i, j, k] = 100 * i + 10 * j + k
    return {
        "blocks.0.attn.Wq": (np.arange(6, dtype=np.float32).reshape(2, 3) / 4 - 0.5).astype(np.float32),
        "special": np.array([-0.0, np.inf, -np.inf, np.nan, 5e-324, 1.5, -2.25], dtype=np.float64),
        "ids": np.array([np.iinfo(np.int64).min, -1, 0, np.iinfo(np.int64).max], dtype=np.int64),
        "scalar": np.array(2.5, dtype=np.float64),
        "fortran": np.asfortranarray(fortran),
        "big_endian": np.array([1.5, -2.0], dtype=">f8"),
        "small_ints": np.array([1, -2, 2147483647], dtype="<i4"),
        "flags": np.array([True, False, True]),
        "empty": np.zeros((0, 3), dtype=np.float32),
        "rank4": (np.arange(12, dtype=np.float32) - 5.5).reshape(2, 1, 3, 2),
    }


def npy_bytes(array, **kw):
    buf = io.BytesIO()
    np.save(buf, array, **kw)
    return buf.getvalue()


def raw_npy(header, payload):
    """A version 1.0 npy with a hand-written header dict (padded as numpy pads)."""
    h = header.encode("latin1")
    pad = 64 - (10 + len(h) + 1) % 64
    h = h + b" " * pad + b"\n"
    return b"\x93NUMPY\x01\x00" + len(h).to_bytes(2, "little") + h + payload


def write_zip(path, members, method=zipfile.ZIP_STORED):
    # A fixed member time, so re-running the script rewrites identical files.
    with zipfile.ZipFile(path, "w", method) as z:
        for name, data in members:
            z.writestr(zipfile.ZipInfo(name, date_time=(2000, 1, 1, 0, 0, 0)), data,
                       compress_type=method)


def make_fixtures(out):
    arrays = fixture_arrays()
    assert arrays["fortran"].flags.f_contiguous
    np.savez(f"{out}/numpy_savez.npz", **arrays)
    np.savez_compressed(f"{out}/numpy_savez_compressed.npz", **arrays)
    ok = npy_bytes(np.array([1.0, 2.0], dtype=np.float32))
    # Each of these must be rejected with NpzError by load_npz.
    write_zip(f"{out}/bad_not_npy_member.npz", [("w.npy", ok), ("README.txt", b"hello\n")])
    write_zip(f"{out}/bad_magic.npz", [("w.npy", b"\x93NUMPX" + ok[6:])])
    write_zip(f"{out}/bad_huge_shape.npz",
              [("w.npy", raw_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1048576, 1048576), }", b"\0" * 16))])
    write_zip(f"{out}/bad_overflow_shape.npz",
              [("w.npy", raw_npy("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 4611686018427387904, 4), }", b"\0" * 8))])
    write_zip(f"{out}/bad_shape_payload_mismatch.npz",
              [("w.npy", raw_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", b"\0" * 8))])
    write_zip(f"{out}/bad_complex_dtype.npz", [("z.npy", npy_bytes(np.array([1 + 2j])))])
    write_zip(f"{out}/bad_object_dtype.npz",
              [("o.npy", npy_bytes(np.array([{"a": 1}], dtype=object), allow_pickle=True))])
    write_zip(f"{out}/bad_structured_dtype.npz",
              [("s.npy", npy_bytes(np.zeros(2, dtype=[("a", "<f4"), ("b", "<i8")])))])
    write_zip(f"{out}/bad_extra_key.npz",
              [("w.npy", raw_npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1, }", b"\0" * 8))])
    write_zip(f"{out}/bad_path_name.npz", [("../evil.npy", ok)])
    write_zip(f"{out}/bad_bzip2_member.npz", [("w.npy", ok)], zipfile.ZIP_BZIP2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate: that's the point
        write_zip(f"{out}/bad_duplicate_member.npz", [("w.npy", ok), ("w.npy", ok)])
    # numpy.savez of nothing: a valid, empty archive (loads as no entries).
    np.savez(f"{out}/numpy_empty.npz")
    print(f"wrote fixtures to {out}")


def check(path):
    """The arrays that test_npz.cpp's 'numpy.load reads what save_npz writes' saves."""
    expected = {
        "blocks.0.attn.Wq": (np.arange(12, dtype=np.float32).reshape(3, 4) * 0.25 - 1).astype(np.float32),
        "special": np.array([-0.0, np.inf, -np.inf, np.nan, 5e-324, -1.0], dtype=np.float64),
        "step": np.array(1234567890123, dtype=np.int64),
        "rank4": (np.arange(24, dtype=np.float64) * 0.5 - 3).reshape(2, 3, 1, 4),
    }
    errors = []
    with np.load(path, allow_pickle=False) as z:
        if sorted(z.files) != sorted(expected):
            errors.append(f"keys {sorted(z.files)} != {sorted(expected)}")
        for name, want in expected.items():
            if name not in z.files:
                continue
            got = z[name]
            if got.dtype != want.dtype or got.shape != want.shape:
                errors.append(f"{name}: {got.dtype}{got.shape} != {want.dtype}{want.shape}")
            elif got.tobytes() != want.tobytes():
                errors.append(f"{name}: values differ: {got!r} != {want!r}")
    if errors:
        print("npz-check: FAILED\n" + "\n".join(errors))
        return 1
    print("npz-check: OK")
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "make-fixtures":
        make_fixtures(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "check":
        sys.exit(check(sys.argv[2]))
    else:
        print(__doc__)
        sys.exit(2)
