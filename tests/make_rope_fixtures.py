#!/usr/bin/python3
"""Writes the PyTorch reference fixtures that tests/test_rope.cpp compares against.

Run with Debian's python3-torch (torch 1.13): /usr/bin/python3 tests/make_rope_fixtures.py
CI does not run this script; it runs the C++ test on the committed fixtures.

Every case is a directory tests/fixtures/rope/<case>/ of float64 .npy files:
  x                 the input, (..., T, head_dim), or (B, T, heads * head_dim) for rope_heads
  g                 the upstream gradient
  out               rope(x)
  dx                d sum(out * g) / dx
  inv_freq          (head_dim / 2,)
  attention_factor  (1,)
The spec of each case (style, scaling, fields, offset, heads) is written out again in the
table of tests/test_rope.cpp; a mismatch between the two shows up as a failing fixture.

The reference is written in torch from the formulas of Hugging Face's modeling_rope_utils
(not from tapegrad's code), and the two pairings are formed two different ways, as their
home code does: half as HF's x * cos + rotate_half(x) * sin with cos/sin = cat(freqs,
freqs); interleaved as Meta's complex product view_as_complex(x pairs) * polar(af, angle).
"""
import math
import os

import numpy as np
import torch

torch.set_default_dtype(torch.float64)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "rope")


def default_inv_freq(dim, theta):
    return 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))


def llama3_inv_freq(dim, s):
    inv = default_inv_freq(dim, s["theta"])
    L, lo, hi, f = s["original_context"], s["low"], s["high"], s["factor"]
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > L / lo, inv / f, inv)
    smooth = (L / wavelen - lo) / (hi - lo)
    smoothed = (1 - smooth) * scaled / f + smooth * scaled
    medium = ~(wavelen < L / hi) & ~(wavelen > L / lo)
    return torch.where(medium, smoothed, scaled)


def yarn_inv_freq(dim, s):
    theta, f, L = s["theta"], s["factor"], s["original_context"]

    def correction_dim(rotations):
        return dim * math.log(L / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    low = max(math.floor(correction_dim(s.get("beta_fast", 32.0))), 0)
    high = min(math.ceil(correction_dim(s.get("beta_slow", 1.0))), dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low), 0, 1)
    extrapolation = 1 - ramp
    inv = default_inv_freq(dim, theta)
    attention = 0.1 * math.log(f) + 1 if f > 1 else 1.0
    return (inv / f) * (1 - extrapolation) + inv * extrapolation, attention


def frequencies(dim, s):
    kind = s["scaling"]
    if kind == "none":
        return default_inv_freq(dim, s["theta"]), 1.0
    if kind == "linear":
        return default_inv_freq(dim, s["theta"]) / s["factor"], 1.0
    if kind == "ntk":
        return default_inv_freq(dim, s["theta"] * s["factor"] ** (dim / (dim - 2))), 1.0
    if kind == "llama3":
        return llama3_inv_freq(dim, s), 1.0
    if kind == "yarn":
        return yarn_inv_freq(dim, s)
    raise ValueError(kind)


def rope_ref(x, offset, s):
    """x (..., T, dim) rotated at positions offset + t."""
    T, dim = x.shape[-2], x.shape[-1]
    inv, af = frequencies(dim, s)
    angle = torch.arange(offset, offset + T, dtype=torch.float64)[:, None] * inv[None, :]
    if s["style"] == "half":
        cos = torch.cat([angle.cos(), angle.cos()], -1) * af
        sin = torch.cat([angle.sin(), angle.sin()], -1) * af
        x1, x2 = x[..., : dim // 2], x[..., dim // 2:]
        return x * cos + torch.cat([-x2, x1], -1) * sin
    pairs = torch.view_as_complex(x.reshape(*x.shape[:-1], dim // 2, 2).contiguous())
    rotor = torch.polar(torch.full_like(angle, af), angle)
    return torch.view_as_real(pairs * rotor).reshape(x.shape)


def rope_heads_ref(x, heads, offset, s):
    """x (B, T, heads * dim): split into (B, heads, T, dim), rotate, merge."""
    B, T, W = x.shape
    split = x.reshape(B, T, heads, W // heads).permute(0, 2, 1, 3)
    return rope_ref(split, offset, s).permute(0, 2, 1, 3).reshape(B, T, W)


def save(case, **arrays):
    d = os.path.join(OUT, case)
    os.makedirs(d, exist_ok=True)
    for name, a in arrays.items():
        a = a.detach().numpy() if isinstance(a, torch.Tensor) else np.asarray(a)
        a = np.ascontiguousarray(a.astype(np.float64))
        assert np.all(np.isfinite(a)), (case, name)
        np.save(os.path.join(d, name + ".npy"), a)


def case(name, seed, shape, offset, spec, heads=None):
    torch.manual_seed(seed)
    x = torch.randn(*shape).requires_grad_(True)
    if heads is None:
        out = rope_ref(x, offset, spec)
        dim = shape[-1]
    else:
        out = rope_heads_ref(x, heads, offset, spec)
        dim = shape[-1] // heads
    g = torch.randn(out.shape)
    (dx,) = torch.autograd.grad((out * g).sum(), [x])
    inv, af = frequencies(dim, spec)
    save(name, x=x, g=g, out=out, dx=dx, inv_freq=inv, attention_factor=np.array([af]))


def sanity_checks():
    """The reference's own properties, so a slip in it fails here before it is committed."""
    torch.manual_seed(0)
    x = torch.randn(3, 16)
    for style in ("half", "interleaved"):
        s = {"style": style, "scaling": "none", "theta": 10000.0}
        # a rotation keeps each row's norm, and rotating by p then by -p (the transpose,
        # i.e. the gradient map) gives the input back
        y = rope_ref(x, 5, s)
        assert torch.allclose(y.norm(dim=-1), x.norm(dim=-1), rtol=1e-13)
        xr = x.clone().requires_grad_(True)
        (back,) = torch.autograd.grad((rope_ref(xr, 5, s) * y).sum(), [xr])
        assert torch.allclose(back, x, rtol=1e-12, atol=1e-13)
    # llama3 and yarn leave the highest frequency alone and divide the lowest by factor
    inv = default_inv_freq(64, 500000.0)
    ll = llama3_inv_freq(64, {"theta": 500000.0, "factor": 8.0, "low": 1.0, "high": 4.0,
                              "original_context": 8192})
    assert ll[0] == inv[0] and torch.isclose(ll[-1], inv[-1] / 8, rtol=1e-15)
    ya, _ = yarn_inv_freq(16, {"theta": 10000.0, "factor": 4.0, "original_context": 64})
    inv16 = default_inv_freq(16, 10000.0)
    assert ya[0] == inv16[0] and torch.isclose(ya[-1], inv16[-1] / 4, rtol=1e-15)


LLAMA3_SMALL = {"scaling": "llama3", "theta": 10000.0, "factor": 4.0, "low": 1.0, "high": 4.0,
                "original_context": 64}
LLAMA31 = {"scaling": "llama3", "theta": 500000.0, "factor": 8.0, "low": 1.0, "high": 4.0,
           "original_context": 8192}
YARN = {"scaling": "yarn", "theta": 10000.0, "factor": 4.0, "original_context": 64}


def main():
    sanity_checks()
    seed = 1
    for style in ("half", "interleaved"):
        specs = {
            "none": ((2, 3, 5, 8), 3, {"scaling": "none", "theta": 10000.0}),
            "linear": ((2, 7, 8), 7, {"scaling": "linear", "theta": 10000.0, "factor": 2.5}),
            "ntk": ((3, 6, 16), 11, {"scaling": "ntk", "theta": 10000.0, "factor": 3.0}),
            "llama3": ((2, 9, 16), 40, LLAMA3_SMALL),
            "llama31": ((1, 6, 64), 9000, LLAMA31),
            "yarn": ((2, 80, 16), 5, YARN),
        }
        for name, (shape, offset, spec) in specs.items():
            case(f"{name}_{style}", seed, shape, offset, dict(spec, style=style))
            seed += 1
        case(f"heads_yarn_{style}", seed, (2, 6, 3 * 8), 70, dict(YARN, style=style), heads=3)
        seed += 1


if __name__ == "__main__":
    main()
