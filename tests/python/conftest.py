"""pytest for the Python bindings. Which tapegrad is tested is whichever `import tapegrad`
finds: the build tree (PYTHONPATH=build/python) or a `pip install .` into a venv;
the header line says which. TAPEGRAD_BUILD_DIR (default: build/ of this checkout) holds the
C++ programs some tests compare with."""
import importlib
import os
import pathlib

import numpy as np
import pytest
import tapegrad

ROOT = pathlib.Path(__file__).resolve().parents[2]


def pytest_report_header(config):
    return f"tapegrad from {pathlib.Path(tapegrad.__file__).parent}"


def require_module(name):
    """The reference package `name` (transformers, tokenizers, safetensors): skipped when it
    is missing, except under TAPEGRAD_REQUIRE_HF=1 (the test command), where that fails."""
    if os.environ.get("TAPEGRAD_REQUIRE_HF") == "1":
        return importlib.import_module(name)
    return pytest.importorskip(name)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture(scope="session")
def build_dir():
    d = pathlib.Path(os.environ.get("TAPEGRAD_BUILD_DIR", ROOT / "build"))
    if not (d / "examples").is_dir():
        pytest.fail(f"no C++ build at {d} (set TAPEGRAD_BUILD_DIR)")
    return d
