#!/usr/bin/python3
"""Writes the PyTorch reference fixtures that tests/test_{embedding,norm,cross_entropy}.cpp
compare against.

Run with Debian's python3-torch (torch 1.13): /usr/bin/python3 tests/make_nnops_fixtures.py
CI does not run this script; it runs the C++ tests on the committed fixtures.

Every case is a directory tests/fixtures/nnops/<case>/ of .npy files (float64 unless said):
  layer_norm*     x gamma beta eps gy | y dx dgamma dbeta     F.layer_norm
  rms_norm*       x gamma eps gy      | y dx dgamma           x * rsqrt(mean(x^2) + eps) * gamma,
                                                              written out in torch
  embedding*      weight ids(int64) gy | y dweight            F.embedding
  cross_entropy*  logits targets(int64) ignore_index(int64) gloss | loss dlogits
                                                              F.cross_entropy, class axis last
Upstream gradients: every input gradient is of L = sum(y * gy) (gloss is a (1,) scalar for
the loss). eps and ignore_index are stored as shape (1,).
"""
import os

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "nnops")


def save(case, **arrays):
    d = os.path.join(OUT, case)
    os.makedirs(d, exist_ok=True)
    for name, a in arrays.items():
        if isinstance(a, torch.Tensor):
            a = a.detach().numpy()
        a = np.ascontiguousarray(a)
        assert a.dtype in (np.float64, np.int64), (case, name, a.dtype)
        np.save(os.path.join(d, name + ".npy"), a)


def leaf(shape, scale=1.0, shift=0.0):
    return (torch.randn(*shape) * scale + shift).requires_grad_()


def grads(y, gy, *inputs):
    return torch.autograd.grad(y, inputs, gy)


def layer_norm_case(case, shape, eps, x_scale=1.0, x_shift=0.0):
    D = shape[-1]
    x = leaf(shape, x_scale, x_shift)
    gamma = leaf((D,), 0.5, 1.0)
    beta = leaf((D,), 0.5)
    y = F.layer_norm(x, (D,), gamma, beta, eps)
    gy = torch.randn(*shape)
    dx, dgamma, dbeta = grads(y, gy, x, gamma, beta)
    save(case, x=x, gamma=gamma, beta=beta, eps=np.array([eps]), gy=gy, y=y, dx=dx,
         dgamma=dgamma, dbeta=dbeta)


def rms_norm_case(case, shape, eps, x_scale=1.0):
    D = shape[-1]
    x = leaf(shape, x_scale)
    gamma = leaf((D,), 0.5, 1.0)
    # RMSNorm written out (torch 1.13 has no F.rms_norm)
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * gamma
    gy = torch.randn(*shape)
    dx, dgamma = grads(y, gy, x, gamma)
    save(case, x=x, gamma=gamma, eps=np.array([eps]), gy=gy, y=y, dx=dx, dgamma=dgamma)


def embedding_case(case, V, D, ids):
    weight = leaf((V, D))
    ids = torch.tensor(ids, dtype=torch.int64)
    y = F.embedding(ids, weight)
    gy = torch.randn(*y.shape)
    (dweight,) = grads(y, gy, weight)
    save(case, weight=weight, ids=ids, gy=gy, y=y, dweight=dweight)


def cross_entropy_case(case, shape, targets, ignore_index, scale=1.0):
    C = shape[-1]
    logits = leaf(shape, scale)
    targets = torch.tensor(targets, dtype=torch.int64)
    assert tuple(targets.shape) == tuple(shape[:-1])
    # F.cross_entropy wants the class axis second: flatten (..., C) to (N, C)
    loss = F.cross_entropy(logits.reshape(-1, C), targets.reshape(-1),
                           ignore_index=ignore_index, reduction="mean")
    gloss = torch.tensor(1.7)
    (dlogits,) = grads(loss, gloss, logits)
    save(case, logits=logits, targets=targets, ignore_index=np.array([ignore_index]),
         gloss=gloss.reshape(1), loss=loss.reshape(1), dlogits=dlogits)


def main():
    torch.manual_seed(20240611)
    layer_norm_case("layer_norm_3d", (2, 3, 8), 1e-5)
    # rows with a large offset and a tiny spread: tests the two-pass variance
    layer_norm_case("layer_norm_offset", (4, 6), 1e-6, x_scale=0.01, x_shift=100.0)
    rms_norm_case("rms_norm_3d", (2, 3, 8), 1e-5)
    rms_norm_case("rms_norm_2d", (5, 7), 1e-6, x_scale=3.0)
    # repeated ids (3 three times, 7 twice) and an unused row: the scatter-add
    embedding_case("embedding_2d_ids", 10, 4, [[3, 7, 3, 0, 9], [3, 7, 1, 2, 5]])
    embedding_case("embedding_1d_ids", 6, 5, [5, 0, 5, 5])
    # default ignore_index and two ignored rows
    cross_entropy_case("cross_entropy_3d", (2, 5, 7),
                       [[0, 6, -100, 3, 3], [-100, 1, 2, 5, 4]], -100, scale=2.0)
    # ignore_index inside [0, C) (a padding class), as when pad id = 0
    cross_entropy_case("cross_entropy_pad0", (6, 4), [0, 1, 3, 0, 2, 2], 0)
    # large logits: the row max must be subtracted
    cross_entropy_case("cross_entropy_large", (3, 5), [4, 0, 2], -100, scale=300.0)
    # C = 37: several SIMD widths plus a remainder (the others are narrower than one batch)
    cross_entropy_case("cross_entropy_wide", (2, 3, 37), [[36, 0, 17], [-100, 8, 35]], -100)


if __name__ == "__main__":
    main()
