#!/usr/bin/env python3
"""tinygrad on its CPU device (kernels generated and compiled for this CPU), each step in
TinyJit; Tensor.scaled_dot_product_attention(is_causal=True, enable_gqa), tinygrad.nn.optim
AdamW (decoupled weight decay, bias-corrected, as torch's). Threads: NUM_CPU_THREADS=N
(the CPU device's worker threads), OMP/OpenBLAS variables = N."""
import os
import sys

import numpy as np

import common
import train_math

args = common.parse_args("tinygrad")
common.set_thread_env(args.threads, ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUM_CPU_THREADS"))
os.environ["DEV"] = "CPU"
import tinygrad  # noqa: E402
from tinygrad import Device, Tensor, TinyJit, dtypes  # noqa: E402
from tinygrad.nn.optim import AdamW  # noqa: E402


def info():
    import importlib.metadata
    return dict(version=importlib.metadata.version("tinygrad"), device=Device.DEFAULT,
                NUM_CPU_THREADS=os.environ.get("NUM_CPU_THREADS"), path=os.path.dirname(tinygrad.__file__)[-40:])


def heads(y, B, T, n):
    return y.reshape(B, T, n, -1).transpose(1, 2)


def merge(o, B, T):
    return o.transpose(1, 2).reshape(B, T, -1)


def attend(q, k, v):
    return q.scaled_dot_product_attention(k, v, is_causal=True, enable_gqa=k.shape[1] != q.shape[1])


def mha(x, Wq, Wk, Wv, Wo, H, KV):
    B, T, _ = x.shape
    return merge(attend(heads(x @ Wq, B, T, H), heads(x @ Wk, B, T, KV), heads(x @ Wv, B, T, KV)), B, T) @ Wo


def layer_norm(x, g, b):
    return x.layernorm(eps=1e-5) * g + b


def rms_norm(x, g, eps):
    return x * ((x * x).mean(-1, keepdim=True) + eps).rsqrt() * g


def toygpt_loss(w, P, tokens, targets):
    H, T = w["heads"], tokens.shape[1]
    x = P["tok_emb.weight"][tokens] + P["pos_emb.weight"][:T]
    for l in range(w["layers"]):
        b = f"blocks.{l}."
        h = layer_norm(x, P[b + "norm1.weight"], P[b + "norm1.bias"])
        x = x + mha(h, P[b + "attn.Wq"], P[b + "attn.Wk"], P[b + "attn.Wv"], P[b + "attn.Wo"], H, H)
        h = layer_norm(x, P[b + "norm2.weight"], P[b + "norm2.bias"])
        x = x + (h @ P[b + "mlp.fc.weight"] + P[b + "mlp.fc.bias"]).gelu() @ P[b + "mlp.proj.weight"] \
            + P[b + "mlp.proj.bias"]
    x = layer_norm(x, P["norm_f.weight"], P["norm_f.bias"])
    return (x @ P["head.weight"]).reshape(-1, w["vocab"]).sparse_categorical_crossentropy(targets.reshape(-1))


def llama_loss(w, cos, sin, P, tokens, targets):
    H, KV, eps = w["heads"], w["kv_heads"], w["norm_eps"]
    B, T = tokens.shape

    def rope(x):  # (B, N, T, dh)
        half = x.shape[-1] // 2
        return x * cos[:T] + (-x[..., half:]).cat(x[..., :half], dim=-1) * sin[:T]
    x = P["tok_emb.weight"][tokens]
    for l in range(w["layers"]):
        b = f"blocks.{l}."
        h = rms_norm(x, P[b + "norm1.weight"], eps)
        q = rope(heads(h @ P[b + "attn.Wq"], B, T, H))
        k = rope(heads(h @ P[b + "attn.Wk"], B, T, KV))
        v = heads(h @ P[b + "attn.Wv"], B, T, KV)
        x = x + merge(attend(q, k, v), B, T) @ P[b + "attn.Wo"]
        h = rms_norm(x, P[b + "norm2.weight"], eps)
        x = x + ((h @ P[b + "mlp.gate.weight"]).silu() * (h @ P[b + "mlp.up.weight"])) @ P[b + "mlp.down.weight"]
    logits = rms_norm(x, P["norm_f.weight"], eps) @ P["head.weight"]
    return logits.reshape(-1, w["vocab"]).sparse_categorical_crossentropy(targets.reshape(-1))


def tensors(ref, keys, dtype=None):
    out = []
    for k in keys:
        a = np.asarray(ref[k])
        out.append(Tensor(a.astype(dtype) if dtype else a).realize())
    return out


def params_of(ref, prefix):
    return {k: Tensor(a).realize() for k, a in common.params(ref, prefix).items()}


class Mha:
    def __init__(self, w, ref):
        self.w, self.ref = w, ref
        dt = np.float64 if w["dtype"] == "float64" else np.float32
        self.p = tensors(ref, ("x", "Wq", "Wk", "Wv", "Wo"), dt)
        self.G = tensors(ref, ("G",), dt)[0]
        H, KV = w["H"], w["KV"]
        if w["backward"]:
            def fb():
                for t in self.p:
                    t.grad = None
                y = mha(*self.p, H, KV)
                y.backward(self.G)
                return [y.realize()] + [t.grad.realize() for t in self.p]
        else:
            def fb():
                return [mha(*self.p, H, KV).realize()]
        self.f = TinyJit(fb)

    def step(self):
        out = self.f()
        Device[Device.DEFAULT].synchronize()
        return out

    def check(self):
        out = self.step()
        return common.check_mha(self.w, self.ref, out[0].numpy(), [g.numpy() for g in out[1:]])


def training():
    """Training mode, which the optimiser step requires: Tensor.train() in the tinygrad
    releases that have it, the TRAINING context variable in those (0.14) that replaced it."""
    if hasattr(Tensor, "train"):
        return Tensor.train()
    from tinygrad.helpers import Context
    return Context(TRAINING=1)


class Train:
    def __init__(self, w, ref):
        self.w, self.ref = w, ref
        seq = np.asarray(ref["tokens"])
        self.tokens, self.targets = Tensor(seq[:, :-1].copy()).realize(), Tensor(seq[:, 1:].copy()).realize()
        if w["kind"] == "toygpt":
            self.loss = lambda P, a, b: toygpt_loss(w, P, a, b)  # noqa: E731
            self.P = params_of(ref, "param.")
        else:
            cos, sin = (Tensor(t).realize() for t in train_math.rope_tables(np, w))
            self.loss = lambda P, a, b: llama_loss(w, cos, sin, P, a, b)  # noqa: E731
            self.P = params_of(ref, "train.")
        self.opt = AdamW(list(self.P.values()), lr=w["lr"], b1=w["beta1"], b2=w["beta2"], eps=w["eps"],
                         weight_decay=w["weight_decay"])

        def train_step():
            with training():
                self.opt.zero_grad()
                loss = self.loss(self.P, self.tokens, self.targets)
                loss.backward()
                self.opt.step()
                return loss.realize()
        self.train_step = TinyJit(train_step)
        self.losses = []

    def step(self):
        self.losses.append(self.train_step().item())

    def check(self):
        c = common.TrainCheck(self.w)
        P = self.P if c.weights is None else params_of(self.ref, c.weights)
        loss = self.loss(P, self.tokens[:c.rows], self.targets[:c.rows])
        loss.backward()
        err = c.compare(self.ref, loss.item(), [(k, p.grad.numpy()) for k, p in P.items()])
        for p in P.values():
            p.grad = None
        return err


class Flash:
    def __init__(self, w, ref):
        common.require_scores_fit(w, "tinygrad's attention")
        self.w, self.ref = w, ref
        B, T, H = w["B"], w["T"], w["H"]
        self.p = tensors(ref, ("q", "k", "v"))
        self.dO = tensors(ref, ("dO",))[0]

        def fb():
            for t in self.p:
                t.grad = None
            q, k, v = (heads(t, B, T, H) for t in self.p)
            out = merge(attend(q, k, v), B, T)
            out.backward(self.dO)
            return [out.realize()] + [t.grad.realize() for t in self.p]
        self.f = TinyJit(fb)

    def step(self):
        out = self.f()
        Device[Device.DEFAULT].synchronize()
        return out

    def check(self):
        out = self.step()
        return common.check_flash(self.ref, out[0].numpy(), [g.numpy() for g in out[1:]])


def build(w, ref, a):
    return common.builder({"mha": Mha, "toygpt": Train, "llama": Train, "flash": Flash}, w, "tinygrad")(w, ref)


sys.exit(common.run("tinygrad", args, build, info))
