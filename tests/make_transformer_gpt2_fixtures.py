#!/usr/bin/python3
"""Writes tests/fixtures/transformer_gpt2/: a small Transformer's weights, a fixed batch,
and what PyTorch (float64) computes from them, for tests/test_transformer_gpt2.cpp (as
llm.c's test_gpt2 checks its C model against the PyTorch one).

The model is written out here in plain torch ops, independently of the C++ code:
token + learned positional embedding, pre-norm blocks (x + attn(ln1(x)),
x + mlp(ln2(x))), causal multi-head attention with (D, D) weights and no biases
(heads split as reshape(B, T, H, dh).transpose(1, 2)), GELU in its tanh form, final
norm, untied head without bias. Linear weights are stored (in, out): y = x @ W + b.

Run with Debian's python3-torch (1.13) and numpy:
    /usr/bin/python3 tests/make_transformer_gpt2_fixtures.py
CI does not run this script; it runs the C++ test against the committed files.
"""
import math
import os

import numpy as np
import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "transformer_gpt2")
V, C, D, H, L, RATIO, B = 11, 8, 16, 2, 2, 4, 2
EPS = 1e-5
IGNORE = -100
ADAMW = dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)


def parameter_shapes(norm="layer_norm"):
    """Names and shapes in Transformer's registration order (nn/transformer.hpp)."""
    def norm_params(prefix):
        out = [(prefix + ".weight", (D,))]
        if norm == "layer_norm":
            out.append((prefix + ".bias", (D,)))
        return out

    shapes = [("tok_emb.weight", (V, D)), ("pos_emb.weight", (C, D))]
    for i in range(L):
        p = f"blocks.{i}."
        shapes += norm_params(p + "norm1")
        shapes += [(p + "attn." + w, (D, D)) for w in ("Wq", "Wk", "Wv", "Wo")]
        shapes += norm_params(p + "norm2")
        shapes += [(p + "mlp.fc.weight", (D, RATIO * D)), (p + "mlp.fc.bias", (RATIO * D,)),
                   (p + "mlp.proj.weight", (RATIO * D, D)), (p + "mlp.proj.bias", (D,))]
    shapes += norm_params("norm_f")
    shapes.append(("head.weight", (D, V)))
    return shapes


def make_weights(rng):
    """Larger than GPT-2's init on purpose, so every path carries a visible gradient."""
    weights = {}
    for name, shape in parameter_shapes():
        if name.endswith("norm1.weight") or name.endswith("norm2.weight") or name == "norm_f.weight":
            w = 1.0 + 0.1 * rng.standard_normal(shape)
        elif name.endswith(".bias"):
            w = 0.1 * rng.standard_normal(shape)
        elif name.endswith("mlp.proj.weight"):
            w = rng.standard_normal(shape) / math.sqrt(shape[0])
        else:
            w = 0.4 * rng.standard_normal(shape)
        weights[name] = w
    return weights


def layer_norm(x, p, prefix):
    return F.layer_norm(x, (D,), p[prefix + ".weight"], p[prefix + ".bias"], eps=EPS)


def rms_norm(x, p, prefix):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + EPS) * p[prefix + ".weight"]


def attention(x, p, prefix, scale):
    Bn, T, _ = x.shape
    dh = D // H

    def heads(t):  # (B, T, D) -> (B, H, T, dh)
        return t.reshape(Bn, T, H, dh).transpose(1, 2)

    q, k, v = (heads(x @ p[prefix + w]) for w in ("Wq", "Wk", "Wv"))
    scores = (q @ k.transpose(-1, -2)) * scale
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    scores = scores.masked_fill(~causal, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(Bn, T, D)
    return out @ p[prefix + "Wo"]


def forward(p, tokens, norm="layer_norm", scale=None):
    normf = layer_norm if norm == "layer_norm" else rms_norm
    scale = 1.0 / math.sqrt(D // H) if scale is None else scale
    T = tokens.shape[1]
    x = p["tok_emb.weight"][tokens] + p["pos_emb.weight"][:T]
    for i in range(L):
        b = f"blocks.{i}."
        x = x + attention(normf(x, p, b + "norm1"), p, b + "attn.", scale)
        h = normf(x, p, b + "norm2")
        h = F.gelu(h @ p[b + "mlp.fc.weight"] + p[b + "mlp.fc.bias"], approximate="tanh")
        x = x + h @ p[b + "mlp.proj.weight"] + p[b + "mlp.proj.bias"]
    return normf(x, p, "norm_f") @ p["head.weight"]


def loss_of(logits, targets):
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=IGNORE)


def params_from(weights, names):
    return {n: torch.tensor(weights[n], requires_grad=True) for n in names}


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20240607)
    weights = make_weights(rng)
    tokens = rng.integers(0, V, size=(B, C), dtype=np.int64)
    targets = rng.integers(0, V, size=(B, C), dtype=np.int64)
    targets[1, 3] = IGNORE  # one ignored position: the mean runs over the other 15

    config = {"format": 1, "vocab": V, "context": C, "d_model": D, "heads": H, "layers": L,
              "mlp_ratio": RATIO, "norm": 0, "attention_init": 0, "seed": 0}
    entries = dict(weights)
    entries.update({"__config__." + k: np.int64(v) for k, v in config.items()})
    entries["__config__.attention_scale"] = np.float64("nan")  # default 1/sqrt(d_head)
    np.savez(os.path.join(OUT, "weights.npz"), **entries)
    np.savez(os.path.join(OUT, "batch.npz"), tokens=tokens, targets=targets)

    names = [n for n, _ in parameter_shapes()]
    tok, tgt = torch.from_numpy(tokens), torch.from_numpy(targets)

    # logits, loss and every parameter's gradient
    p = params_from(weights, names)
    logits = forward(p, tok)
    loss = loss_of(logits, tgt)
    loss.backward()
    expected = {"logits": logits.detach().numpy(), "loss": np.float64(loss.item())}
    expected.update({"grad." + n: p[n].grad.numpy() for n in names})

    # the same weights with unscaled attention (scale 1), and with RMSNorm
    p = params_from(weights, names)
    expected["logits_unscaled"] = forward(p, tok, scale=1.0).detach().numpy()
    rms_names = [n for n, _ in parameter_shapes("rms_norm")]
    p = params_from(weights, rms_names)
    expected["logits_rms"] = forward(p, tok, norm="rms_norm").detach().numpy()

    # torch.optim.AdamW: the loss before and after each of two steps
    p = params_from(weights, names)
    opt = torch.optim.AdamW([p[n] for n in names], **ADAMW)
    losses = []
    for step in range(3):
        opt.zero_grad()
        loss = loss_of(forward(p, tok), tgt)
        losses.append(loss.item())
        if step < 2:
            loss.backward()
            opt.step()
    expected["adamw_losses"] = np.array(losses)
    expected["adamw_settings"] = np.array([ADAMW["lr"], ADAMW["betas"][0], ADAMW["betas"][1],
                                           ADAMW["eps"], ADAMW["weight_decay"]])
    np.savez(os.path.join(OUT, "expected.npz"), **expected)
    print(f"torch {torch.__version__}: loss {expected['loss']:.12f}, AdamW losses {losses}")


if __name__ == "__main__":
    main()
