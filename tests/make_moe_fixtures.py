#!/usr/bin/python3
"""Writes the PyTorch reference fixtures that tests/test_moe.cpp compares the
mixture-of-experts layer (nn/moe.hpp) against.

Run with Debian's python3-torch: /usr/bin/python3 tests/make_moe_fixtures.py
CI does not run this script; it runs the C++ test on the committed fixtures.

The layer as users write it (Hugging Face's Mixtral sparse block), in plain torch ops in
float64: router logits = x @ W_router (no bias), p = softmax over all E experts, top k of p,
the kept weights divided by their sum when renorm, a loop over experts that runs each on its
tokens and index_add_s the weighted rows back; aux = E * sum_e f_e P_e (f = fraction of
tokens with e among their k choices, no gradient; P = mean over tokens of p), z = mean over
tokens of logsumexp(logits)^2. Weights are stored (in, out), tapegrad's layout (x @ W).

Each case is tests/fixtures/moe/<case>/:
  inputs   x router e<i>_<gate|up|down> (swiglu) or e<i>_<fc|fc_bias|proj|proj_bias> (gelu),
           gy (upstream gradient of y)
  outputs  y aux z, and d<name> of L = sum(y * gy) + 0.5 aux + 0.25 z for x and every weight
"""
import math
import os

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "moe")


def gelu_tanh(x):
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def expert(p, e, rows, swiglu):
    if swiglu:
        return (torch.nn.functional.silu(rows @ p[f"e{e}_gate"]) * (rows @ p[f"e{e}_up"])) @ p[f"e{e}_down"]
    h = gelu_tanh(rows @ p[f"e{e}_fc"] + p[f"e{e}_fc_bias"])
    return h @ p[f"e{e}_proj"] + p[f"e{e}_proj_bias"]


def moe(p, E, k, renorm, swiglu):
    x = p["x"]
    D = x.shape[-1]
    xf = x.reshape(-1, D)
    N = xf.shape[0]
    logits = xf @ p["router"]
    probs = torch.softmax(logits, dim=-1)
    w, idx = torch.topk(probs, k, dim=-1)
    if renorm:
        w = w / w.sum(dim=-1, keepdim=True)
    y = torch.zeros_like(xf)
    for e in range(E):
        tok, j = torch.where(idx == e)
        if tok.numel() == 0:
            continue
        y = y.index_add(0, tok, expert(p, e, xf[tok], swiglu) * w[tok, j, None])
    f = torch.nn.functional.one_hot(idx, E).sum(dim=1).to(torch.float64).mean(dim=0)
    aux = E * (f * probs.mean(dim=0)).sum()
    z = (torch.logsumexp(logits, dim=-1) ** 2).mean()
    return y.reshape(x.shape), aux, z, idx


def save(case, tensors):
    d = os.path.join(OUT, case)
    os.makedirs(d, exist_ok=True)
    for name, t in tensors.items():
        np.save(os.path.join(d, name + ".npy"), t.detach().numpy())


def make(case, seed, B, T, D, F, E, k, renorm, swiglu):
    g = torch.Generator().manual_seed(seed)
    randn = lambda *s, std=1.0: (torch.randn(*s, generator=g) * std).requires_grad_()
    p = {"x": randn(B, T, D), "router": randn(D, E, std=0.8)}
    for e in range(E):
        if swiglu:
            p[f"e{e}_gate"] = randn(D, F, std=0.5)
            p[f"e{e}_up"] = randn(D, F, std=0.5)
            p[f"e{e}_down"] = randn(F, D, std=0.5)
        else:
            p[f"e{e}_fc"] = randn(D, F, std=0.5)
            p[f"e{e}_fc_bias"] = randn(F, std=0.1)
            p[f"e{e}_proj"] = randn(F, D, std=0.5)
            p[f"e{e}_proj_bias"] = randn(D, std=0.1)
    y, aux, z, idx = moe(p, E, k, renorm, swiglu)
    # the routing must not sit near a tie, or the two sides could choose differently
    probs = torch.softmax(p["x"].reshape(-1, D) @ p["router"], -1).detach()
    top = torch.sort(probs, dim=-1, descending=True).values
    assert (top[:, k - 1] - top[:, k]).min() > 1e-6, case
    gy = torch.randn(y.shape, generator=g)
    L = (y * gy).sum() + 0.5 * aux + 0.25 * z
    L.backward()
    out = dict(p)
    out.update({"gy": gy, "y": y, "aux": aux.reshape(1), "z": z.reshape(1),
                "config": torch.tensor([E, k, int(renorm), int(swiglu)], dtype=torch.float64)})
    for name, t in p.items():
        out["d" + name] = t.grad
    save(case, out)
    print(case, "y", tuple(y.shape), "aux", float(aux), "z", float(z),
          "tokens per expert", torch.bincount(idx.flatten(), minlength=E).tolist())


if __name__ == "__main__":
    make("k2_renorm_swiglu", 1, 2, 6, 8, 12, 4, 2, True, True)
    make("k2_raw_swiglu", 2, 2, 6, 8, 12, 4, 2, False, True)
    make("k1_renorm_swiglu", 3, 2, 5, 8, 12, 4, 1, True, True)
    make("k1_raw_gelu", 4, 3, 4, 8, 10, 5, 1, False, False)
    make("k3_renorm_gelu", 5, 1, 9, 6, 10, 6, 3, True, False)
