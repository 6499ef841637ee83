"""Reference counting: 100,000 small ops from Python leave RSS flat and every tensor freed;
a deleted model's memory goes back to the system."""
import gc

import numpy as np
import tapegrad as tg
from tapegrad import nn


def rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4


def run_ops(n, keep=None):
    a = tg.tensor(np.ones(8, np.float32), requires_grad=True)
    b = tg.tensor(np.full(8, 0.5, np.float32), requires_grad=True)
    for i in range(n // 5):
        y = tg.tanh(a * b + 1.0) - b  # 4 ops
        loss = tg.sum(y)               # 5th
        if i % 10 == 0:
            loss.backward()
        if keep is not None:
            keep.append(y)


def test_100k_ops_rss_flat_and_no_live_tensors():
    run_ops(20_000)  # warm the allocator and pybind11's caches
    tensors, rss = tg.live_tensors("float32"), rss_kib()
    run_ops(100_000)
    assert tg.live_tensors("float32") == tensors
    assert rss_kib() - rss < 1024, f"RSS grew by {rss_kib() - rss} KiB"


def test_the_check_sees_a_leak():
    # Holding the results is what a leaked reference does: the same check must fail.
    run_ops(20_000)
    tensors, rss = tg.live_tensors("float32"), rss_kib()
    kept = []
    run_ops(100_000, keep=kept)
    assert tg.live_tensors("float32") - tensors >= 20_000
    assert rss_kib() - rss >= 1024


def test_a_deleted_model_returns_its_memory_to_the_system():
    # ~200 MB of float32 weights. tapegrad keeps freed memory for reuse (autograd/memory.hpp),
    # but a model deleted from Python is handed back.
    config = nn.Config(vocab=512, context=64, d_model=1024, heads=8, layers=4)
    weights_kib = config.count_parameters() * 4 // 1024
    assert weights_kib > 180 * 1024
    gc.collect()
    before = rss_kib()
    model = nn.Transformer(config)
    assert rss_kib() - before > weights_kib * 0.9  # the pages were touched
    del model
    gc.collect()
    assert rss_kib() - before < 32 * 1024, f"RSS still {rss_kib() - before} KiB above"
