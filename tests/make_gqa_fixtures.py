#!/usr/bin/python3
"""Writes the PyTorch reference fixtures that tests/test_attention_gqa.cpp compares against:
grouped-query and multi-query attention, sliding windows and the bottom-right causal mask
for Tq < Tk.

Run with Debian's python3-torch (torch 1.13): /usr/bin/python3 tests/make_gqa_fixtures.py
CI does not run this script; it runs the C++ test on the committed fixtures.

torch 1.13 has neither F.scaled_dot_product_attention nor enable_gqa, so the reference is
the formula written out in plain torch ops (not tapegrad's code): kv heads expanded with
repeat_interleave (query head h reads kv head h // (H // KV)), masked scores -inf before
the softmax, a query at absolute position i = (Tk - Tq) + r seeing key j iff j <= i and,
with a window w, i - j < w.

Every case is a directory tests/fixtures/gqa/<case>/ of float64 .npy files:
  inputs    q (B, Tq, H*dh), k (B, Tk, KV*dh), v (B, Tk, KV*dv)
  upstream  gout (B, Tq, H*dv), gweights (B, H, Tq, Tk)
  outputs   out, weights
  grads     dq dk dv of L = sum(out*gout) + sum(weights*gweights)
  config    [heads, kv_heads, causal, window, scale] (scale 0: the default 1/sqrt(dh))
"""
import math
import os

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "gqa")


def visible(Tq, Tk, causal, window):
    """(Tq, Tk) bool: may query row r attend to key j (bottom-right aligned)."""
    i = torch.arange(Tq)[:, None] + (Tk - Tq)  # absolute position of query row r
    j = torch.arange(Tk)[None, :]
    allowed = torch.ones(Tq, Tk, dtype=torch.bool)
    if causal:
        allowed &= j <= i
    if window:
        allowed &= (i - j) < window
    return allowed


def attention(q, k, v, H, KV, causal, window, scale, modify=None):
    """modify(scores, Tq, Tk), when given, changes the scaled scores before the mask."""
    B, Tq, _ = q.shape
    Tk = k.shape[1]
    dh, dv = q.shape[2] // H, v.shape[2] // KV
    qh = q.reshape(B, Tq, H, dh).permute(0, 2, 1, 3)
    kh = k.reshape(B, Tk, KV, dh).permute(0, 2, 1, 3).repeat_interleave(H // KV, dim=1)
    vh = v.reshape(B, Tk, KV, dv).permute(0, 2, 1, 3).repeat_interleave(H // KV, dim=1)
    scores = qh @ kh.transpose(-1, -2) * (scale if scale else 1.0 / math.sqrt(dh))
    if modify:
        scores = modify(scores, Tq, Tk)
    scores = scores.masked_fill(~visible(Tq, Tk, causal, window), float("-inf"))
    w = torch.softmax(scores, -1)
    out = (w @ vh).permute(0, 2, 1, 3).reshape(B, Tq, H * dv)
    return out, w


def case(name, seed, B, Tq, Tk, H, KV, dh, dv, causal=False, window=0, scale=0.0):
    torch.manual_seed(seed)
    q = torch.randn(B, Tq, H * dh).requires_grad_(True)
    k = torch.randn(B, Tk, KV * dh).requires_grad_(True)
    v = torch.randn(B, Tk, KV * dv).requires_grad_(True)
    out, w = attention(q, k, v, H, KV, causal, window, scale)
    gout, gw = torch.randn(out.shape), torch.randn(w.shape)
    ((out * gout).sum() + (w * gw).sum()).backward()
    save(os.path.join(OUT, name),
         dict(q=q, k=k, v=v, gout=gout, gweights=gw, out=out, weights=w, dq=q.grad, dk=k.grad,
              dv=v.grad,
              config=torch.tensor([H, KV, int(causal), window, scale], dtype=torch.float64)))


def save(directory, arrays):
    """Each tensor as directory/<name>.npy, float64, after checking it is finite."""
    os.makedirs(directory, exist_ok=True)
    for n, a in arrays.items():
        a = np.ascontiguousarray(a.detach().numpy().astype(np.float64))
        assert np.all(np.isfinite(a)), (directory, n)
        np.save(os.path.join(directory, n + ".npy"), a)


def main():
    case("gqa_causal", 11, B=2, Tq=6, Tk=6, H=4, KV=2, dh=3, dv=3, causal=True)
    case("mqa_noncausal_dv", 12, B=2, Tq=4, Tk=6, H=4, KV=1, dh=4, dv=2, scale=1.0)
    case("gqa_window", 13, B=2, Tq=7, Tk=7, H=4, KV=2, dh=3, dv=3, causal=True, window=3)
    case("gqa_causal_tq_lt_tk", 14, B=2, Tq=3, Tk=7, H=4, KV=2, dh=3, dv=3, causal=True)
    case("mqa_window_tq_lt_tk", 15, B=2, Tq=3, Tk=7, H=2, KV=1, dh=3, dv=4, causal=True,
         window=2, scale=0.8)
    print("wrote", sorted(os.listdir(OUT)), "to", OUT)


if __name__ == "__main__":
    main()
