"""Allocations that cannot fit are a MemoryError naming the sizes, raised before anything
is allocated, instead of the kernel killing the process or a bare std::bad_alloc."""
import re

import numpy as np
import pytest
import tapegrad as tg
from tapegrad import nn

TiB = 1 << 40


@pytest.fixture
def max_memory():
    """tg.set_max_memory for one test, lifted afterwards."""
    yield tg.set_max_memory
    tg.set_max_memory(None)


def test_a_model_larger_than_memory_is_refused_with_its_sizes():
    cfg = nn.Config(vocab=1 << 24, context=8, d_model=1 << 16, heads=4)
    params = cfg.count_parameters()
    assert params * 4 > TiB  # no machine this runs on has that much
    with pytest.raises(MemoryError, match=rf"Transformer: {params} parameters need [0-9.]+ TiB in float32 "
                                          r".*more than the [0-9.]+ [KMGT]iB available"):
        nn.Transformer(cfg)
    with pytest.raises(MemoryError, match=r"parameters need [0-9.]+ TiB in float64"):
        nn.Transformer(cfg, dtype="float64")


def test_a_tensor_larger_than_memory_is_refused_with_its_shape():
    with pytest.raises(MemoryError, match=r"zeros: shape \(4194304,4194304,1024\) needs [0-9.]+ PiB in float32"):
        tg.zeros((1 << 22, 1 << 22, 1 << 10))
    with pytest.raises(MemoryError, match=r"randn: shape \(1099511627776,1024\) needs [0-9.]+ PiB in float64"):
        tg.randn((1 << 40, 1 << 10), tg.Generator(0), dtype="float64")


def test_an_allocation_that_fails_anyway_is_a_memory_error_saying_what_is_available():
    x = tg.ones((4,))
    with pytest.raises(MemoryError, match=r"out of memory.*[0-9.]+ [KMGT]iB available"):
        tg.repeat_interleave(x, 1 << 40, axis=0)  # 16 TiB in one allocation


def test_set_max_memory_bounds_models_optimisers_and_tensors(max_memory):
    cfg = nn.Config(vocab=64, context=8, d_model=32, heads=2, layers=2)
    weights = cfg.count_parameters() * 4
    max_memory(weights * 3 // 2)  # the weights fit; AdamW's two moments do not
    model = nn.Transformer(cfg)
    with pytest.raises(MemoryError, match=rf"AdamW: moments for {cfg.count_parameters()} parameters need "
                                          r"[0-9.]+ KiB .*set_max_memory"):
        nn.AdamW(model.parameters())
    nn.SGD(model.parameters(), momentum=0.0)  # no state: nothing to refuse
    with pytest.raises(MemoryError, match=r"ones: shape \(1024,1024\) needs 4 MiB in float32"):
        tg.ones((1024, 1024))
    max_memory(None)
    nn.AdamW(model.parameters())
    assert tg.ones((1024, 1024)).size == 1 << 20


def test_set_max_memory_refuses_nonsense():
    with pytest.raises(tg.ShapeError, match="set_max_memory"):
        tg.set_max_memory(0)
    with pytest.raises(TypeError, match="set_max_memory: max_bytes must be"):
        tg.set_max_memory("1G")
