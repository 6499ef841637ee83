#!/usr/bin/python3
"""Writes the PyTorch reference fixtures that tests/test_attention.cpp compares against.

Run with Debian's python3-torch (torch 1.13): /usr/bin/python3 tests/make_attention_fixtures.py
CI does not run this script; it runs the C++ test on the committed fixtures.

Every case is a directory tests/fixtures/attention/<case>/ of float64 .npy files:
  inputs         Q K V [mask] [scale]      or   x Wq Wk Wv Wo
  upstream grads gout gweights                  gy gweights
  outputs        out weights                    y weights
  input grads    dQ dK dV of L = sum(out*gout) + sum(weights*gweights)
                 (MHA: dx dWq dWk dWv dWo of L = sum(y*gy), and the same with a _yw
                 suffix for L = sum(y*gy) + sum(weights*gweights))
Masks are stored as float64 0/1 (1 = may attend); scale.npy (shape (1,)) exists only when
the case passes an explicit scale.

The reference is the attention formula written out in torch (not tapegrad's code): masked
scores -inf before the softmax, and a row with nothing to attend to set to zero with
torch.where, so no NaN is ever formed. Multi-head results are additionally cross-checked
against torch.nn.functional.multi_head_attention_forward.
"""
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "attention")


def sdpa(Q, K, V, mask=None, scale=None):
    if scale is None:
        scale = 1.0 / math.sqrt(Q.shape[-1])
    scores = Q @ K.transpose(-1, -2) * scale
    if mask is None:
        return torch.softmax(scores, -1) @ V, torch.softmax(scores, -1)
    mask = mask.expand(scores.shape)
    scores = scores.masked_fill(~mask, float("-inf"))
    any_allowed = mask.any(-1, keepdim=True)
    # a fully masked row: softmax of zeros (finite), then replaced by 0
    safe = torch.where(any_allowed, scores, torch.zeros_like(scores))
    weights = torch.where(any_allowed, torch.softmax(safe, -1), torch.zeros_like(scores))
    return weights @ V, weights


def causal_mask(T):
    return torch.tril(torch.ones(T, T, dtype=torch.bool))


def mha(x, Wq, Wk, Wv, Wo, heads, causal, scale=None):
    B, T, D = x.shape
    dh = D // heads

    def split(t):
        return t.reshape(B, T, heads, dh).permute(0, 2, 1, 3)

    q, k, v = split(x @ Wq), split(x @ Wk), split(x @ Wv)
    out, w = sdpa(q, k, v, causal_mask(T) if causal else None,
                  scale if scale is not None else 1.0 / math.sqrt(dh))
    return out.permute(0, 2, 1, 3).reshape(B, T, D) @ Wo, w


def mha_torch(x, Wq, Wk, Wv, Wo, heads, causal):
    """PyTorch's own multi-head attention (Linear computes x @ W^T, hence the .T)."""
    T = x.shape[1]
    y, w = F.multi_head_attention_forward(
        x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1), x.shape[2], heads,
        torch.cat([Wq.T, Wk.T, Wv.T]), None, None, None, False, 0.0, Wo.T, None,
        training=False, need_weights=True,
        attn_mask=~causal_mask(T) if causal else None,  # True = NOT allowed, in torch
        average_attn_weights=False)
    return y.transpose(0, 1), w


def save(case, **arrays):
    d = os.path.join(OUT, case)
    os.makedirs(d, exist_ok=True)
    for name, a in arrays.items():
        a = a.detach().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
        a = np.ascontiguousarray(a.astype(np.float64))
        assert np.all(np.isfinite(a)), (case, name)
        np.save(os.path.join(d, name + ".npy"), a)


def leaf(*shape):
    return torch.randn(*shape).requires_grad_(True)


def sdpa_case(case, seed, q_shape, k_shape, v_shape, mask_fn=None, scale=None):
    torch.manual_seed(seed)
    Q, K, V = leaf(*q_shape), leaf(*k_shape), leaf(*v_shape)
    mask = mask_fn() if mask_fn else None
    out, w = sdpa(Q, K, V, mask, scale)
    gout, gw = torch.randn(out.shape), torch.randn(w.shape)
    ((out * gout).sum() + (w * gw).sum()).backward()
    extra = {}
    if mask is not None:
        extra["mask"] = mask.double()
    if scale is not None:
        extra["scale"] = np.array([scale])
    save(case, Q=Q, K=K, V=V, gout=gout, gweights=gw, out=out, weights=w,
         dQ=Q.grad, dK=K.grad, dV=V.grad, **extra)
    return mask, out, w, Q.grad


def mha_case(case, seed, B, T, D, heads, causal, scale=None):
    torch.manual_seed(seed)
    x = leaf(B, T, D)
    Ws = [(torch.randn(D, D) / math.sqrt(D)).requires_grad_(True) for _ in range(4)]
    inputs = [x] + Ws
    y, w = mha(x, *Ws, heads, causal, scale)
    gy, gw = torch.randn(y.shape), torch.randn(w.shape)
    grads = torch.autograd.grad((y * gy).sum(), inputs, retain_graph=True)
    grads_yw = torch.autograd.grad((y * gy).sum() + (w * gw).sum(), inputs)
    if scale is None:  # PyTorch's own MHA always scales by 1/sqrt(dh)
        y_t, w_t = mha_torch(x, *Ws, heads, causal)
        assert torch.allclose(y, y_t, rtol=1e-12, atol=1e-13), case
        assert torch.allclose(w, w_t, rtol=1e-12, atol=1e-13), case
        grads_t = torch.autograd.grad((y_t * gy).sum() + (w_t * gw).sum(), inputs)
        for a, b in zip(grads_yw, grads_t):
            assert torch.allclose(a, b, rtol=1e-11, atol=1e-12), case
    names = ["x", "Wq", "Wk", "Wv", "Wo"]
    arrays = dict(zip(names, inputs))
    arrays.update({"d" + n: g for n, g in zip(names, grads)})
    arrays.update({"d" + n + "_yw": g for n, g in zip(names, grads_yw)})
    if scale is not None:
        arrays["scale"] = np.array([scale])
    save(case, gy=gy, gweights=gw, y=y, weights=w, **arrays)


def main():
    sdpa_case("sdpa_2d", 1, (3, 4), (5, 4), (5, 3))
    sdpa_case("sdpa_4d_causal", 2, (2, 3, 4, 5), (2, 3, 4, 5), (2, 3, 4, 6),
              mask_fn=lambda: causal_mask(4))

    def random_mask_with_empty_row():
        m = torch.rand(2, 3, 5) < 0.6
        m[..., 0] |= ~m.any(-1)  # every row may attend somewhere ...
        m[1, 1, :] = False       # ... except this one, which is fully masked
        return m

    mask, out, w, dQ = sdpa_case("sdpa_mask_fully_masked", 3, (2, 3, 4), (2, 5, 4), (2, 5, 3),
                                 mask_fn=random_mask_with_empty_row)
    assert bool((w[1, 1] == 0).all() and (out[1, 1] == 0).all() and (dQ[1, 1] == 0).all())
    assert int((~mask).sum()) >= 3 and bool(mask[0].any(-1).all())

    # K and V shared across the batch (leading 1), a (Tq, Tk) mask broadcast over
    # batch and heads, Tq != Tk, d_v != d_k, and an explicit scale
    def random_mask():
        m = torch.rand(3, 5) < 0.6
        m[:, 2] = True
        return m

    sdpa_case("sdpa_broadcast", 4, (2, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 6),
              mask_fn=random_mask, scale=0.7)

    mha_case("mha_causal", 5, 2, 5, 8, 2, True)
    mha_case("mha_noncausal", 6, 2, 5, 8, 2, False)
    mha_case("mha_causal_unscaled", 7, 2, 5, 8, 4, True, scale=1.0)
    print("wrote", sorted(os.listdir(OUT)), "to", OUT)


if __name__ == "__main__":
    main()
