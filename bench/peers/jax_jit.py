#!/usr/bin/env python3
"""JAX with jax.jit on XLA's CPU backend: each workload's whole step (forward, jax.vjp or
value_and_grad, and for training the AdamW update) is one jitted function; attention is
jax.nn.dot_product_attention(is_causal=True) (XLA's implementation on the CPU: it forms the
scores). Threads: at 1, XLA_FLAGS=--xla_cpu_multi_thread_eigen=false
intra_op_parallelism_threads=1; at N > 1 XLA's default (one thread per core; this machine
has 2). OMP/MKL/OpenBLAS variables = N. Float64 through jax_enable_x64."""
import os
import sys

import numpy as np

import common
import train_math

args = common.parse_args("jax_jit")
common.set_thread_env(args.threads)
if args.threads == 1:
    os.environ["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
os.environ["JAX_PLATFORMS"] = "cpu"
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

jax.config.update("jax_enable_x64", True)


def info():
    import jaxlib
    return dict(version=jax.__version__, jaxlib=jaxlib.__version__, backend=jax.default_backend(),
                devices=[str(d) for d in jax.devices()], XLA_FLAGS=os.environ.get("XLA_FLAGS", "(unset)"))


def attend(q, k, v):
    """(B, T, N, dh) causal attention; fewer K/V heads are shared by groups of query heads."""
    return jax.nn.dot_product_attention(q, k, v, is_causal=True)


def mha(x, Wq, Wk, Wv, Wo, H, KV):
    B, T, D = x.shape
    q, k, v = (x @ Wq).reshape(B, T, H, -1), (x @ Wk).reshape(B, T, KV, -1), (x @ Wv).reshape(B, T, KV, -1)
    return attend(q, k, v).reshape(B, T, D) @ Wo


def layer_norm(x, g, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / jnp.sqrt(var + eps) * g + b


def rms_norm(x, g, eps):
    return x / jnp.sqrt((x * x).mean(-1, keepdims=True) + eps) * g


def cross_entropy(logits, targets):
    lse = jax.scipy.special.logsumexp(logits, -1)
    return (lse - jnp.take_along_axis(logits, targets[..., None], -1)[..., 0]).mean()


def toygpt_loss(w, P, tokens, targets):
    D, H, T = w["d_model"], w["heads"], tokens.shape[1]
    x = P["tok_emb.weight"][tokens] + P["pos_emb.weight"][:T]
    for l in range(w["layers"]):
        b = f"blocks.{l}."
        h = layer_norm(x, P[b + "norm1.weight"], P[b + "norm1.bias"])
        x = x + mha(h, P[b + "attn.Wq"], P[b + "attn.Wk"], P[b + "attn.Wv"], P[b + "attn.Wo"], H, H)
        h = layer_norm(x, P[b + "norm2.weight"], P[b + "norm2.bias"])
        h = jax.nn.gelu(h @ P[b + "mlp.fc.weight"] + P[b + "mlp.fc.bias"], approximate=True)
        x = x + h @ P[b + "mlp.proj.weight"] + P[b + "mlp.proj.bias"]
    x = layer_norm(x, P["norm_f.weight"], P["norm_f.bias"])
    return cross_entropy(x @ P["head.weight"], targets)


def llama_loss(w, cos, sin, P, tokens, targets):
    H, KV, eps = w["heads"], w["kv_heads"], w["norm_eps"]
    B, T = tokens.shape

    def rope(x):  # (B, T, N, dh)
        half = x.shape[-1] // 2
        rot = jnp.concatenate([-x[..., half:], x[..., :half]], -1)
        return x * cos[:T, None, :] + rot * sin[:T, None, :]
    x = P["tok_emb.weight"][tokens]
    for l in range(w["layers"]):
        b = f"blocks.{l}."
        h = rms_norm(x, P[b + "norm1.weight"], eps)
        q = rope((h @ P[b + "attn.Wq"]).reshape(B, T, H, -1))
        k = rope((h @ P[b + "attn.Wk"]).reshape(B, T, KV, -1))
        v = (h @ P[b + "attn.Wv"]).reshape(B, T, KV, -1)
        x = x + attend(q, k, v).reshape(B, T, -1) @ P[b + "attn.Wo"]
        h = rms_norm(x, P[b + "norm2.weight"], eps)
        x = x + (jax.nn.silu(h @ P[b + "mlp.gate.weight"]) * (h @ P[b + "mlp.up.weight"])) @ P[b + "mlp.down.weight"]
    return cross_entropy(rms_norm(x, P["norm_f.weight"], eps) @ P["head.weight"], targets)


def params_of(ref, prefix):
    return {k: jnp.asarray(a) for k, a in common.params(ref, prefix).items()}


class Mha:
    def __init__(self, w, ref):
        self.w, self.ref = w, ref
        dt = np.float64 if w["dtype"] == "float64" else np.float32
        self.p = [jnp.asarray(np.asarray(ref[k], dtype=dt)) for k in ("x", "Wq", "Wk", "Wv", "Wo")]
        self.G = jnp.asarray(np.asarray(ref["G"], dtype=dt))
        f = lambda *p: mha(*p, w["H"], w["KV"])  # noqa: E731
        if w["backward"]:
            def fwdbwd(p, G):
                y, back = jax.vjp(f, *p)
                return y, back(G)
            self.f = jax.jit(fwdbwd)
        else:
            self.f = jax.jit(lambda p, G: (f(*p), None))

    def step(self):
        return jax.block_until_ready(self.f(self.p, self.G))

    def check(self):
        y, grads = self.step()
        return common.check_mha(self.w, self.ref, np.asarray(y), [np.asarray(g) for g in grads or ()])


class Train:
    def __init__(self, w, ref):
        self.w, self.ref = w, ref
        seq = jnp.asarray(np.asarray(ref["tokens"]))
        self.tokens, self.targets = seq[:, :-1], seq[:, 1:]
        if w["kind"] == "toygpt":
            self.loss = lambda P, a, b: toygpt_loss(w, P, a, b)  # noqa: E731
            self.P = params_of(ref, "param.")
        else:
            cos, sin = (jnp.asarray(t) for t in train_math.rope_tables(np, w))
            self.loss = lambda P, a, b: llama_loss(w, cos, sin, P, a, b)  # noqa: E731
            self.P = params_of(ref, "train.")
        self.m = {k: jnp.zeros_like(p) for k, p in self.P.items()}
        self.v = {k: jnp.zeros_like(p) for k, p in self.P.items()}
        self.t = 0
        self.grad = jax.jit(jax.value_and_grad(self.loss))

        def train_step(P, m, v, t, tokens, targets):
            loss, g = jax.value_and_grad(self.loss)(P, tokens, targets)
            P, m, v = train_math.adamw(jnp, w, P, g, m, v, t)
            return loss, P, m, v
        self.train_step = jax.jit(train_step, donate_argnums=(0, 1, 2))
        self.losses = []

    def step(self):
        self.t += 1
        loss, self.P, self.m, self.v = self.train_step(self.P, self.m, self.v, jnp.float32(self.t),
                                                       self.tokens, self.targets)
        self.losses.append(float(loss))

    def check(self):
        c = common.TrainCheck(self.w)
        P = self.P if c.weights is None else params_of(self.ref, c.weights)
        loss, g = self.grad(P, self.tokens[:c.rows], self.targets[:c.rows])
        return c.compare(self.ref, float(loss), [(k, np.asarray(g[k])) for k in g])


class Flash:
    def __init__(self, w, ref):
        self.w, self.ref = w, ref
        common.require_scores_fit(w, "XLA's attention")
        self.p = [jnp.asarray(ref[k]) for k in ("q", "k", "v")]
        self.dO = jnp.asarray(ref["dO"])
        B, T, H = w["B"], w["T"], w["H"]

        def f(q, k, v):
            return attend(q.reshape(B, T, H, -1), k.reshape(B, T, H, -1), v.reshape(B, T, H, -1)).reshape(B, T, -1)

        def fwdbwd(p, dO):
            out, back = jax.vjp(f, *p)
            return out, back(dO)
        self.f = jax.jit(fwdbwd)

    def step(self):
        return jax.block_until_ready(self.f(self.p, self.dO))

    def check(self):
        out, grads = self.step()
        return common.check_flash(self.ref, np.asarray(out), [np.asarray(g) for g in grads])


def build(w, ref, a):
    return common.builder({"mha": Mha, "toygpt": Train, "llama": Train, "flash": Flash}, w, "jax_jit")(w, ref)


sys.exit(common.run("jax_jit", args, build, info))
