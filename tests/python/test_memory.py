"""Reference counting: 100,000 small ops from Python leave RSS flat and every tensor freed."""
import numpy as np
import tapegrad as tg


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
