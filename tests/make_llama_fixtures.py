#!/usr/bin/python3
"""Writes the PyTorch reference fixtures that tests/test_transformer.cpp compares against.

Run with Debian's python3-torch (torch 1.13): /usr/bin/python3 tests/make_llama_fixtures.py
CI does not run this script; it runs the C++ test on the committed fixtures.

One Llama block, written out in plain torch ops in float64 (torch 1.13 has no RMSNorm, no
scaled_dot_product_attention and no enable_gqa, and the point is an independent reference):

  h = x + attn(rmsnorm(x) * g1)            attn: GQA with RoPE, causal [, window] [, QK-norm]
  y = h + down(silu(gate(n)) * up(n)),     n = rmsnorm(h) * g2

Weights are stored (in, out), tapegrad's layout (x @ W). Query head j reads K/V head
j // (heads / kv_heads) (repeat_interleave). Each case is tests/fixtures/llama_block/<case>/:
  inputs   x norm1 Wq Wk Wv Wo [q_norm k_norm] norm2 gate up down     gy (upstream gradient)
  outputs  y, and d<name> of L = sum(y * gy) for x and every parameter
and tests/fixtures/llama_block/swiglu/: x gate up down gy -> y dx dgate dup ddown.
"""
import math
import os

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "llama_block")


def rmsnorm(x, g, eps=1e-5):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * g


def rope(x, style, theta=10000.0):
    # x (B, H, T, dh); position t rotates pair i by t * theta^(-2i/dh)
    T, dh = x.shape[-2], x.shape[-1]
    inv = theta ** (-torch.arange(0, dh, 2, dtype=torch.float64) / dh)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]  # (T, dh/2)
    cos, sin = torch.cos(ang), torch.sin(ang)
    if style == "half":
        a, b = x[..., : dh // 2], x[..., dh // 2 :]
        return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)
    a, b = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = a * cos - b * sin
    out[..., 1::2] = b * cos + a * sin
    return out


def block(p, heads, kv_heads, style, window, qk_norm):
    x = p["x"]
    B, T, D = x.shape
    dh = p["Wq"].shape[1] // heads
    n = rmsnorm(x, p["norm1"])
    q = (n @ p["Wq"]).view(B, T, heads, dh).transpose(1, 2)
    k = (n @ p["Wk"]).view(B, T, kv_heads, dh).transpose(1, 2)
    v = (n @ p["Wv"]).view(B, T, kv_heads, dh).transpose(1, 2)
    if qk_norm:
        q, k = rmsnorm(q, p["q_norm"]), rmsnorm(k, p["k_norm"])
    q, k = rope(q, style), rope(k, style)
    group = heads // kv_heads
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    s = q @ k.transpose(-1, -2) / math.sqrt(dh)
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    allowed = j <= i
    if window:
        allowed = allowed & (i - j < window)
    w = torch.softmax(s.masked_fill(~allowed, float("-inf")), dim=-1)
    a = (w @ v).transpose(1, 2).reshape(B, T, heads * dh)
    h = x + a @ p["Wo"]
    m = rmsnorm(h, p["norm2"])
    return h + (torch.nn.functional.silu(m @ p["gate"]) * (m @ p["up"])) @ p["down"]


def save(case, tensors):
    d = os.path.join(OUT, case)
    os.makedirs(d, exist_ok=True)
    for name, t in tensors.items():
        np.save(os.path.join(d, name + ".npy"), t.detach().numpy())


def make_block(case, seed, B, T, D, heads, kv_heads, dh, F, style, window, qk_norm):
    g = torch.Generator().manual_seed(seed)
    r = lambda *s, scale=0.3: (torch.randn(*s, generator=g) * scale).requires_grad_()
    p = {"x": r(B, T, D, scale=1.0), "norm1": r(D, scale=0.2), "Wq": r(D, heads * dh),
         "Wk": r(D, kv_heads * dh), "Wv": r(D, kv_heads * dh), "Wo": r(heads * dh, D),
         "norm2": r(D, scale=0.2), "gate": r(D, F), "up": r(D, F), "down": r(F, D)}
    with torch.no_grad():
        p["norm1"] += 1
        p["norm2"] += 1
    if qk_norm:
        p["q_norm"], p["k_norm"] = r(dh, scale=0.2), r(dh, scale=0.2)
        with torch.no_grad():
            p["q_norm"] += 1
            p["k_norm"] += 1
    y = block(p, heads, kv_heads, style, window, qk_norm)
    gy = torch.randn(y.shape, generator=g)
    (y * gy).sum().backward()
    out = dict(p)
    out["y"], out["gy"] = y, gy
    for name, t in p.items():
        out["d" + name] = t.grad
    save(case, out)


def make_swiglu():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(2, 3, 6, generator=g).requires_grad_()
    gate = (torch.randn(6, 10, generator=g) * 0.5).requires_grad_()
    up = (torch.randn(6, 10, generator=g) * 0.5).requires_grad_()
    down = (torch.randn(10, 6, generator=g) * 0.5).requires_grad_()
    # silu written out as x * sigmoid(x), not through F.silu, for an independent formula
    a = x @ gate
    y = (a * torch.sigmoid(a) * (x @ up)) @ down
    gy = torch.randn(y.shape, generator=g)
    (y * gy).sum().backward()
    save("swiglu", {"x": x, "gate": gate, "up": up, "down": down, "gy": gy, "y": y,
                    "dx": x.grad, "dgate": gate.grad, "dup": up.grad, "ddown": down.grad})


if __name__ == "__main__":
    make_block("gqa_rope_half", 1, B=2, T=7, D=16, heads=4, kv_heads=2, dh=6, F=24,
               style="half", window=0, qk_norm=False)
    make_block("mqa_rope_interleaved_window_qknorm", 2, B=2, T=9, D=12, heads=3, kv_heads=1,
               dh=4, F=20, style="interleaved", window=3, qk_norm=True)
    make_swiglu()
    print("wrote", OUT)
