#!/usr/bin/env python3
"""MLX on its CPU backend (the mlx[cpu] wheel for Linux): mx.fast.scaled_dot_product_attention
with mask="causal", mx.fast.layer_norm / rms_norm, mx.vjp and mx.value_and_grad, each step's
function through mx.compile. Threads: OMP/OpenBLAS variables = N; MLX's CPU backend runs an
op at a time on one stream thread, with the reference BLAS its wheel bundles, so N > 1 gives
it nothing more (stated, not hidden)."""
import math
import sys

import numpy as np

import common
import train_math

args = common.parse_args("mlx_cpu")
common.set_thread_env(args.threads)
import mlx.core as mx  # noqa: E402

mx.set_default_device(mx.cpu)


def info():
    return dict(version=mx.__version__, device=str(mx.default_device()),
                blas="the reference BLAS bundled in the mlx-cpu wheel (mlx_cpu.libs/libblas)")


def attend(q, k, v):
    """(B, N, T, dh) causal attention; fewer K/V heads are shared by groups of query heads."""
    return mx.fast.scaled_dot_product_attention(q, k, v, scale=1.0 / math.sqrt(q.shape[-1]), mask="causal")


def heads(y, B, T, n):
    return y.reshape(B, T, n, -1).transpose(0, 2, 1, 3)


def merge(o, B, T):
    return o.transpose(0, 2, 1, 3).reshape(B, T, -1)


def mha(x, Wq, Wk, Wv, Wo, H, KV):
    B, T, _ = x.shape
    return merge(attend(heads(x @ Wq, B, T, H), heads(x @ Wk, B, T, KV), heads(x @ Wv, B, T, KV)), B, T) @ Wo


def gelu_tanh(x):
    return 0.5 * x * (1 + mx.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x * x * x)))


def cross_entropy(logits, targets):
    lse = mx.logsumexp(logits, axis=-1)
    return (lse - mx.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]).mean()


def toygpt_loss(w, P, tokens, targets):
    H, T = w["heads"], tokens.shape[1]
    x = P["tok_emb.weight"][tokens] + P["pos_emb.weight"][:T]
    for l in range(w["layers"]):
        b = f"blocks.{l}."
        h = mx.fast.layer_norm(x, P[b + "norm1.weight"], P[b + "norm1.bias"], 1e-5)
        x = x + mha(h, P[b + "attn.Wq"], P[b + "attn.Wk"], P[b + "attn.Wv"], P[b + "attn.Wo"], H, H)
        h = mx.fast.layer_norm(x, P[b + "norm2.weight"], P[b + "norm2.bias"], 1e-5)
        x = x + gelu_tanh(h @ P[b + "mlp.fc.weight"] + P[b + "mlp.fc.bias"]) @ P[b + "mlp.proj.weight"] \
            + P[b + "mlp.proj.bias"]
    x = mx.fast.layer_norm(x, P["norm_f.weight"], P["norm_f.bias"], 1e-5)
    return cross_entropy(x @ P["head.weight"], targets)


def llama_loss(w, cos, sin, P, tokens, targets):
    H, KV, eps = w["heads"], w["kv_heads"], w["norm_eps"]
    B, T = tokens.shape

    def rope(x):  # (B, N, T, dh)
        half = x.shape[-1] // 2
        return x * cos[:T] + mx.concatenate([-x[..., half:], x[..., :half]], -1) * sin[:T]
    x = P["tok_emb.weight"][tokens]
    for l in range(w["layers"]):
        b = f"blocks.{l}."
        h = mx.fast.rms_norm(x, P[b + "norm1.weight"], eps)
        q = rope(heads(h @ P[b + "attn.Wq"], B, T, H))
        k = rope(heads(h @ P[b + "attn.Wk"], B, T, KV))
        v = heads(h @ P[b + "attn.Wv"], B, T, KV)
        x = x + merge(attend(q, k, v), B, T) @ P[b + "attn.Wo"]
        h = mx.fast.rms_norm(x, P[b + "norm2.weight"], eps)
        gate = h @ P[b + "mlp.gate.weight"]
        x = x + (gate * mx.sigmoid(gate) * (h @ P[b + "mlp.up.weight"])) @ P[b + "mlp.down.weight"]
    return cross_entropy(mx.fast.rms_norm(x, P["norm_f.weight"], eps) @ P["head.weight"], targets)


def params_of(ref, prefix):
    return {k: mx.array(a) for k, a in common.params(ref, prefix).items()}


class Grad:
    """(value, *grads) of f(*inputs) against the cotangent G, forward output included."""

    def __init__(self, f, n, backward):
        def fb(*a):
            outs, grads = mx.vjp(f, list(a[:n]), [a[n]])
            return [outs[0]] + list(grads)
        self.fn = mx.compile(fb if backward else lambda *a: [f(*a[:n])])

    def __call__(self, *a):
        out = self.fn(*a)
        mx.eval(out)
        return out


class Mha:
    def __init__(self, w, ref):
        self.w, self.ref = w, ref
        dt = np.float64 if w["dtype"] == "float64" else np.float32
        self.p = [mx.array(np.asarray(ref[k], dtype=dt)) for k in ("x", "Wq", "Wk", "Wv", "Wo", "G")]
        self.f = Grad(lambda *p: mha(*p, w["H"], w["KV"]), 5, w["backward"])

    def step(self):
        return self.f(*self.p)

    def check(self):
        out = self.step()
        return common.check_mha(self.w, self.ref, np.array(out[0]), [np.array(g) for g in out[1:]])


class Train:
    def __init__(self, w, ref):
        self.w, self.ref = w, ref
        seq = mx.array(np.asarray(ref["tokens"]))
        self.tokens, self.targets = seq[:, :-1], seq[:, 1:]
        if w["kind"] == "toygpt":
            loss = lambda P, a, b: toygpt_loss(w, P, a, b)  # noqa: E731
            self.P = params_of(ref, "param.")
        else:
            cos, sin = (mx.array(t) for t in train_math.rope_tables(np, w))
            loss = lambda P, a, b: llama_loss(w, cos, sin, P, a, b)  # noqa: E731
            self.P = params_of(ref, "train.")
        self.m = {k: mx.zeros_like(p) for k, p in self.P.items()}
        self.v = {k: mx.zeros_like(p) for k, p in self.P.items()}
        self.t = 0
        self.grad = mx.compile(mx.value_and_grad(loss))

        def train_step(P, m, v, t, tokens, targets):
            value, g = mx.value_and_grad(loss)(P, tokens, targets)
            P, m, v = train_math.adamw(mx, w, P, g, m, v, t)
            return value, P, m, v
        self.train_step = mx.compile(train_step)
        self.losses = []

    def step(self):
        self.t += 1
        loss, self.P, self.m, self.v = self.train_step(self.P, self.m, self.v, mx.array(float(self.t)),
                                                       self.tokens, self.targets)
        mx.eval(loss, self.P, self.m, self.v)
        self.losses.append(loss.item())

    def check(self):
        c = common.TrainCheck(self.w)
        P = self.P if c.weights is None else params_of(self.ref, c.weights)
        loss, g = self.grad(P, self.tokens[:c.rows], self.targets[:c.rows])
        mx.eval(loss, g)
        return c.compare(self.ref, loss.item(), [(k, np.array(g[k])) for k in g])


class Flash:
    def __init__(self, w, ref):
        common.require_scores_fit(w, "MLX's CPU attention")
        self.w, self.ref = w, ref
        B, T, H = w["B"], w["T"], w["H"]
        self.p = [mx.array(np.asarray(ref[k])) for k in ("q", "k", "v", "dO")]
        self.f = Grad(lambda q, k, v: merge(attend(heads(q, B, T, H), heads(k, B, T, H), heads(v, B, T, H)), B, T),
                      3, True)

    def step(self):
        return self.f(*self.p)

    def check(self):
        out = self.step()
        return common.check_flash(self.ref, np.array(out[0]), [np.array(g) for g in out[1:]])


def build(w, ref, a):
    return common.builder({"mha": Mha, "toygpt": Train, "llama": Train, "flash": Flash}, w, "mlx_cpu")(w, ref)


sys.exit(common.run("mlx_cpu", args, build, info))
