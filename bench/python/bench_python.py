#!/usr/bin/env python3
"""The cost of driving tapegrad from Python, in one run: the 1,000-op chain and the S1
multi-head attention forward+backward (B 1, T 16, D 32, 4 heads, causal, float32) from
Python through tapegrad, from C++ (bench/tapegrad_bench, when built), and through
PyTorch's Python API (python3-torch). One thread everywhere. Each workload is checked
against a NumPy computation before it is timed.

    python3 bench/python/bench_python.py [--repeats 200] [--cpp-bench build-bench/bench/tapegrad_bench]

Prints a table and writes bench/python/results.json."""
import argparse
import json
import os
import pathlib
import platform
import statistics
import subprocess
import sys
import time

import numpy as np
import tapegrad as tg

CHAIN_OPS, CHAIN_LEN = 1000, 16
B, T, D, H = 1, 16, 32, 4


def chain_inputs():
    r = np.random.default_rng(11)  # b small: y stays near 0 where tanh' ~ 1 (no denormals)
    return r.standard_normal(CHAIN_LEN).astype(np.float32), (0.01 * r.standard_normal(CHAIN_LEN)).astype(np.float32)


def chain_numpy(x, b):
    """loss and d loss / d x, d loss / d b of the chain in float64, by hand."""
    x, b = x.astype(np.float64), b.astype(np.float64)
    ys, y = [x], x
    for i in range(CHAIN_OPS):
        y = y * 0.9 if i % 3 == 0 else y + b if i % 3 == 1 else np.tanh(y)
        ys.append(y)
    g, db = np.ones_like(x), np.zeros_like(x)
    for i in reversed(range(CHAIN_OPS)):
        if i % 3 == 0:
            g = g * 0.9
        elif i % 3 == 1:
            db += g
        else:
            g = g * (1 - ys[i + 1] ** 2)
    return ys[-1].sum(), g, db


def mha_inputs():
    r = np.random.default_rng(3)
    f = lambda *s, k=1.0: (k * r.standard_normal(s)).astype(np.float32)
    return f(B, T, D), [f(D, D, k=D ** -0.5) for _ in range(4)], f(B, T, D)


def mha_numpy(x, Ws, G):
    """The output of causal multi-head attention in float64 (the forward's check; the
    backward is proven by gradcheck in tests/python)."""
    x = x.astype(np.float64)
    Wq, Wk, Wv, Wo = (w.astype(np.float64) for w in Ws)
    split = lambda a: a.reshape(B, T, H, D // H).transpose(0, 2, 1, 3)
    q, k, v = split(x @ Wq), split(x @ Wk), split(x @ Wv)
    s = np.where(np.tril(np.ones((T, T), bool)), q @ k.transpose(0, 1, 3, 2) / np.sqrt(D // H), -np.inf)
    w = np.exp(s - s.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    return (w @ v).transpose(0, 2, 1, 3).reshape(B, T, D) @ Wo


def time_steps(step, warmup, repeats):
    for _ in range(warmup):
        step()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        samples.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(samples)


# ---------------------------------------------------------------- tapegrad from Python
def tapegrad_chain():
    xv, bv = chain_inputs()
    x, b = tg.tensor(xv, requires_grad=True), tg.tensor(bv, requires_grad=True)

    def step():
        x.zero_grad(); b.zero_grad()
        y = x
        for i in range(CHAIN_OPS):
            y = y * 0.9 if i % 3 == 0 else y + b if i % 3 == 1 else tg.tanh(y)
        loss = tg.sum(y)
        loss.backward()
        return loss.item(), x.grad, b.grad
    return step


def tapegrad_mha():
    xv, Wv, Gv = mha_inputs()
    x = tg.tensor(xv, requires_grad=True)
    Ws = [tg.tensor(w, requires_grad=True) for w in Wv]

    def step():
        for t in [x] + Ws:
            t.zero_grad()
        y = tg.multi_head_attention(x, *Ws, heads=H, causal=True)
        y.backward(Gv)
        return y
    return step


# ---------------------------------------------------------------- PyTorch from Python
def torch_chain(torch):
    xv, bv = chain_inputs()
    x, b = torch.tensor(xv, requires_grad=True), torch.tensor(bv, requires_grad=True)

    def step():
        x.grad = None; b.grad = None
        y = x
        for i in range(CHAIN_OPS):
            y = y * 0.9 if i % 3 == 0 else y + b if i % 3 == 1 else torch.tanh(y)
        loss = y.sum()
        loss.backward()
        return loss.item(), x.grad.numpy(), b.grad.numpy()
    return step


def torch_mha(torch):
    xv, Wv, Gv = mha_inputs()
    x = torch.tensor(xv, requires_grad=True)
    Ws = [torch.tensor(w, requires_grad=True) for w in Wv]
    G = torch.tensor(Gv)
    mask = torch.ones(T, T, dtype=torch.bool).tril()

    def step():
        for t in [x] + Ws:
            t.grad = None
        Wq, Wk, Wv_, Wo = Ws
        split = lambda a: a.reshape(B, T, H, D // H).transpose(1, 2)
        q, k, v = split(x @ Wq), split(x @ Wk), split(x @ Wv_)
        s = (q @ k.transpose(-1, -2)) * (D // H) ** -0.5
        w = torch.softmax(s.masked_fill(~mask, float("-inf")), dim=-1)
        y = (w @ v).transpose(1, 2).reshape(B, T, D) @ Wo
        y.backward(G)
        return y
    return step


def check(framework, chain_step, mha_step):
    loss, dx, db = chain_step()
    ref_loss, ref_dx, ref_db = chain_numpy(*chain_inputs())
    assert abs(loss - ref_loss) < 1e-4 * abs(ref_loss), f"{framework}: chain loss"
    for got, ref in ((dx, ref_dx), (db, ref_db)):
        assert np.abs(got - ref).max() <= 1e-3 * np.abs(ref).max(), f"{framework}: chain gradient"
    y = mha_step()
    y = y.detach().numpy() if hasattr(y, "detach") and not isinstance(y, tg.Tensor) else y.numpy()
    ref = mha_numpy(*mha_inputs())
    assert np.abs(y - ref).max() <= 1e-5 * np.abs(ref).max() + 1e-6, f"{framework}: attention output"


def cpp_bench(path, workload, repeats, warmup):
    out = subprocess.run([path, "--workload", workload, "--repeats", str(repeats), "--warmup", str(warmup)],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["median_ms"]


class OneLineParser(argparse.ArgumentParser):
    def error(self, message):  # a usage error: one line, exit 2, nothing written
        print(f"bench_python: {message}", file=sys.stderr)
        sys.exit(2)


def main():
    ap = OneLineParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--cpp-bench", default="build-bench/bench/tapegrad_bench")
    ap.add_argument("--out", default=str(pathlib.Path(__file__).with_name("results.json")))
    o = ap.parse_args()
    import torch
    torch.set_num_threads(1)
    tg.set_num_threads(1)
    rows = {}
    steps = {"tapegrad (Python)": (tapegrad_chain(), tapegrad_mha()),
             "PyTorch (Python)": (torch_chain(torch), torch_mha(torch))}
    for name, (chain, mha) in steps.items():
        check(name, chain, mha)
    # Two rounds, the frameworks taking turns, so that a change in the machine's load hits
    # each alike; the better median of the two rounds counts.
    for _ in range(2):
        for name, (chain, mha) in steps.items():
            r = rows.setdefault(name, {"chain1000_ms": float("inf"), "mha_fwdbwd_f32_S1_ms": float("inf")})
            r["chain1000_ms"] = min(r["chain1000_ms"], time_steps(chain, o.warmup, max(1, o.repeats // 4)))
            r["mha_fwdbwd_f32_S1_ms"] = min(r["mha_fwdbwd_f32_S1_ms"], time_steps(mha, o.warmup, o.repeats))
    if os.path.exists(o.cpp_bench):
        rows["tapegrad (C++)"] = {"chain1000_ms": cpp_bench(o.cpp_bench, "chain1000", o.repeats // 4, o.warmup),
                                  "mha_fwdbwd_f32_S1_ms": cpp_bench(o.cpp_bench, "mha_fwdbwd_f32_S1", o.repeats, o.warmup)}
    else:
        print(f"bench_python: no C++ bench at {o.cpp_bench} (cmake -DTAPEGRAD_BUILD_BENCH=ON); "
              "its column is left out", file=sys.stderr)
    print(f"{'':20} {'1,000-op chain (ms)':>20} {'MHA S1 fwd+bwd (ms)':>20}")
    for name, r in rows.items():
        print(f"{name:20} {r['chain1000_ms']:20.3f} {r['mha_fwdbwd_f32_S1_ms']:20.4f}")
    tp, pt = rows["tapegrad (Python)"], rows["PyTorch (Python)"]
    ratios = {k: pt[k] / tp[k] for k in tp}
    print("PyTorch / tapegrad from Python: " + ", ".join(f"{k} {v:.2f}x" for k, v in ratios.items()))
    result = {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
              "repeats": o.repeats, "median_ms": rows, "torch_over_tapegrad_python": ratios}
    pathlib.Path(o.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0 if all(v > 1 for v in ratios.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
