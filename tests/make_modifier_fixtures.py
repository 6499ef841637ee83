#!/usr/bin/python3
"""Writes the PyTorch reference fixtures of the attention score modifiers (ALiBi, the logit
soft-cap) that tests/test_attention_modifiers.cpp compares against.

Run with Debian's python3-torch (torch 1.13): /usr/bin/python3 tests/make_modifier_fixtures.py
CI does not run this script; it runs the C++ test on the committed fixtures.

The reference is the formula in plain torch ops (not tapegrad's code): kv heads expanded
with repeat_interleave, scores = q.k * (1 / sqrt(dh)), soft-capped c * tanh(s / c), then ALiBi's
bias -m_h * (i - j) with i = (Tk - Tq) + r the query's absolute position and the slopes of
Hugging Face's build_alibi_tensor (copied below), masked scores -inf before the softmax.

Every case is a directory tests/fixtures/modifiers/<case>/ of float64 .npy files:
  inputs    q (B, Tq, H*dh), k (B, Tk, KV*dh), v (B, Tk, KV*dv)
  upstream  gout (B, Tq, H*dv), gweights (B, H, Tq, Tk)
  outputs   out, weights
  grads     dq dk dv of L = sum(out*gout) + sum(weights*gweights)
  config    [heads, kv_heads, causal, window, alibi, softcap]
"""
import math
import os

import torch

from make_gqa_fixtures import attention as gqa_attention, save

torch.set_default_dtype(torch.float64)
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "modifiers")


def alibi_slopes(num_heads):
    """transformers.models.bloom.modeling_bloom.build_alibi_tensor's slopes."""
    closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
    base = torch.tensor(2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))), dtype=torch.float64)
    powers = torch.arange(1, 1 + closest_power_of_2, dtype=torch.int32)
    slopes = torch.pow(base, powers)
    if closest_power_of_2 != num_heads:
        extra_base = torch.tensor(2 ** (-(2 ** -(math.log2(2 * closest_power_of_2) - 3))),
                                  dtype=torch.float64)
        num_remaining_heads = min(closest_power_of_2, num_heads - closest_power_of_2)
        extra_powers = torch.arange(1, 1 + 2 * num_remaining_heads, 2, dtype=torch.int32)
        slopes = torch.cat([slopes, torch.pow(extra_base, extra_powers)], dim=0)
    return slopes


def attention(q, k, v, H, KV, causal, window, alibi, softcap):
    def modify(scores, Tq, Tk):
        if softcap:
            scores = softcap * torch.tanh(scores / softcap)
        if alibi:
            i = torch.arange(Tq)[:, None] + (Tk - Tq)  # absolute position of query row r
            j = torch.arange(Tk)[None, :]
            scores = scores - alibi_slopes(H)[:, None, None] * (i - j).to(torch.float64)
        return scores

    return gqa_attention(q, k, v, H, KV, causal, window, 0.0, modify)


def case(name, seed, B, Tq, Tk, H, KV, dh, dv, causal=True, window=0, alibi=False, softcap=0.0):
    torch.manual_seed(seed)
    q = (1.7 * torch.randn(B, Tq, H * dh)).requires_grad_(True)
    k = (1.7 * torch.randn(B, Tk, KV * dh)).requires_grad_(True)
    v = torch.randn(B, Tk, KV * dv).requires_grad_(True)
    out, w = attention(q, k, v, H, KV, causal, window, alibi, softcap)
    gout, gw = torch.randn(out.shape), torch.randn(w.shape)
    ((out * gout).sum() + (w * gw).sum()).backward()
    save(os.path.join(OUT, name),
         dict(q=q, k=k, v=v, gout=gout, gweights=gw, out=out, weights=w, dq=q.grad, dk=k.grad,
              dv=v.grad, config=torch.tensor([H, KV, int(causal), window, int(alibi), softcap])))


def main():
    case("alibi_gqa6_tq_lt_tk", 21, B=2, Tq=4, Tk=7, H=6, KV=3, dh=3, dv=2, alibi=True)
    case("alibi_window", 22, B=1, Tq=6, Tk=6, H=4, KV=2, dh=3, dv=3, window=3, alibi=True)
    case("softcap_noncausal", 23, B=2, Tq=5, Tk=6, H=2, KV=1, dh=4, dv=3, causal=False,
         softcap=1.5)
    case("softcap_alibi_gqa", 24, B=1, Tq=5, Tk=8, H=4, KV=2, dh=3, dv=2, alibi=True,
         softcap=2.0)
    print("wrote", sorted(os.listdir(OUT)), "to", OUT)


if __name__ == "__main__":
    main()
