"""tapegrad's transformer as plain PyTorch: the same model, to load a tapegrad checkpoint
into and keep training (tools/to_torch.py does the loading; docs/PORTING.md).

Every switch of tapegrad's configuration (nn/config.hpp) is a field of `Config` with the
same name and default (the gpt2 preset's; the list is read from checkpoint_schema.json),
and means the same thing:

  tokens (B, T) -> tok_emb [* sqrt(d_model): embed_scale] [* embed_multiplier] [+ pos_emb]
          [-> embed_norm] -> layers x Block -> norm_f -> head (tied: tok_emb's unscaled
          matrix) -> logits (B, T, V) [/ logit_divisor]
  Block:  x = x + attn(norm1(x));  x = x + mlp(norm2(x))                       (pre-norm)
          post_norms: x = x + norm1_post(attn(norm1(x))), likewise norm2_post  (Gemma 2)
          residual_multiplier r: x = x + r * attn(norm1(x)), likewise          (Granite)
  norm:   LayerNorm (layer), RMSNorm with gain w (rms) or 1 + w, w from 0 (gemma)
  attn:   q, k, v = wq(x), wk(x), wv(x)  (biases: attn_qkv_bias; kv_heads K/V heads, each shared by heads/kv_heads
          query heads) -> [RMSNorm per head: qk_norm] -> [RoPE] -> s = scale q.k^T
          -> [attn_softcap c: c tanh(s/c)] -> [alibi: - slope(h) (i - j)]
          -> softmax(s, causal [, window]) v -> wo (bias: attn_out_bias); scale is
          attention_scale, else query_scale if > 0, else 1/sqrt(head_dim); the window applies
          to every layer, or (window_pattern n > 0) to all but layers n-1, 2n-1, ...
  logits: [final_softcap c: c tanh(logits/c)]
  mlp:    fc -> GELU (tanh form) -> proj, or down(silu(gate(x)) * up(x)) (swiglu), or
          down(gelu_tanh(gate(x)) * up(x)) (geglu)
  moe:    (experts > 0, in layers l with (l + 1) % moe_every == 0) p = softmax(router(x)) over
          all experts; each token to its experts_top_k experts by p (ties: the lower index),
          weights p of those [divided by their sum: moe_renorm]; y = sum of weight x expert(x),
          each expert the model's mlp; a loop over experts with index_add, as users write it

Runs on torch 1.13 (Debian 12), which has no nn.RMSNorm and no scaled_dot_product_attention,
so both are written out here.
"""
import dataclasses
import json
import math
import os
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

# The configuration's fields, their kinds, defaults and choices, as tapegrad declares them
# (nn/config.hpp), from the schema file that tapegrad's tools/checkpoint_schema writes.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "checkpoint_schema.json")) as schema_file:
    SCHEMA = json.load(schema_file)
FIELDS = SCHEMA["fields"]
CHOICES = {f["name"]: f["choices"] for f in FIELDS if f["kind"] == "choice"}
TYPES = {"size": int, "seed": int, "real": float, "flag": bool, "choice": str,
         "optional_real": Optional[float]}

# The architecture fields the module below builds. Any other architecture field must hold
# its `old` value, the model before the field existed (tools/to_torch.py refuses the rest).
IMPLEMENTED = {
    "vocab", "context", "d_model", "layers", "heads", "kv_heads", "head_dim", "norm", "norm_eps",
    "mlp", "mlp_ratio", "mlp_hidden", "mlp_multiple", "mlp_bias", "attn_qkv_bias",
    "attn_out_bias", "positions", "rope_theta",
    "rope_style", "rope_scaling", "rope_factor", "rope_low_freq_factor", "rope_high_freq_factor",
    "rope_original_context", "rope_beta_fast", "rope_beta_slow", "window", "qk_norm",
    "tie_embeddings", "attention_scale", "attn_softcap", "final_softcap",
    "embed_norm", "embed_scale", "post_norms", "window_pattern", "window_global_first",
    "embed_multiplier", "residual_multiplier", "logit_divisor",
    "query_scale",
    "experts", "experts_top_k", "moe_renorm", "moe_every",
    # applies in tapegrad's training forward only; inference is dropless, as this module is
    "moe_capacity",
}
# The objective's fields (role "objective": the auxiliary losses' weights) change training
# only, so any value converts; the execution's (role "execution": how tapegrad runs a step,
# such as checkpoint_activations) are never stored in a checkpoint.


def typed(field, value):
    """A schema value as its field's Python type (JSON writes the real 10000.0 as 10000)."""
    return float(value) if field["kind"] == "real" else value


GATED = ("swiglu", "geglu")  # three matrices: gate, up, down


class Derived:
    """What the zero defaults resolve to, as TransformerConfig's resolved_* compute it."""

    @property
    def kv(self):
        return self.kv_heads or self.heads

    @property
    def dh(self):
        return self.head_dim or self.d_model // self.heads

    @property
    def hidden(self):
        if self.mlp_hidden:
            return self.mlp_hidden
        dense = self.mlp_ratio * self.d_model
        if self.mlp not in GATED:
            return dense
        m = self.mlp_multiple or 1
        return (2 * dense // 3 + m - 1) // m * m

    @property
    def scale(self):
        if self.attention_scale is not None:
            return self.attention_scale
        return self.query_scale if self.query_scale > 0 else 1 / math.sqrt(self.dh)

    def layer_window(self, layer):
        """window_pattern n > 0: layers n-1, 2n-1, ... are global (no window); with
        window_global_first, layers 0, n, 2n, ... are."""
        n = self.window_pattern
        counted = layer if self.window_global_first else layer + 1
        return 0 if n > 0 and counted % n == 0 else self.window


Config = dataclasses.make_dataclass(
    "Config", [(f["name"], TYPES[f["kind"]], dataclasses.field(default=typed(f, f["default"])))
               for f in FIELDS], bases=(Derived,))
Config.__doc__ = "\n".join(f"{f['name']}: {f['doc']}" for f in FIELDS)


class RMSNorm(nn.Module):
    """gain: the weight (offset 0), or 1 + the weight starting at 0 (offset 1: Gemma's)."""

    def __init__(self, dim, eps, offset=0.0):
        super().__init__()
        self.eps, self.offset = eps, offset
        self.weight = nn.Parameter(torch.full((dim,), 1.0 - offset))

    def forward(self, x):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + self.eps) * (self.offset + self.weight)


def make_norm(c: Config, dim):
    if c.norm == "layer":
        return nn.LayerNorm(dim, eps=c.norm_eps)
    return RMSNorm(dim, c.norm_eps, offset=1.0 if c.norm == "gemma" else 0.0)


def rope_frequencies(c: Config):
    """inv_freq (dh/2,) in float64 and the factor on cos and sin, as Hugging Face's
    modeling_rope_utils computes them for each scaling."""
    dh = c.dh
    theta = c.rope_theta
    if c.rope_scaling == "ntk":
        theta = theta * c.rope_factor ** (dh / (dh - 2))
    inv = 1.0 / theta ** (torch.arange(0, dh, 2, dtype=torch.float64) / dh)
    if c.rope_scaling == "linear":
        inv = inv / c.rope_factor
    if c.rope_scaling == "llama3":
        L, lo, hi = c.rope_original_context, c.rope_low_freq_factor, c.rope_high_freq_factor
        wavelen = 2 * math.pi / inv
        scaled = torch.where(wavelen > L / lo, inv / c.rope_factor, inv)
        smooth = (L / wavelen - lo) / (hi - lo)
        blended = (1 - smooth) * scaled / c.rope_factor + smooth * scaled
        medium = (wavelen >= L / hi) & (wavelen <= L / lo)
        inv = torch.where(medium, blended, scaled)
    if c.rope_scaling == "yarn":
        def correction_dim(rotations):
            return dh * math.log(c.rope_original_context / (rotations * 2 * math.pi)) / (
                2 * math.log(c.rope_theta))
        low = max(math.floor(correction_dim(c.rope_beta_fast)), 0)
        high = min(math.ceil(correction_dim(c.rope_beta_slow)), dh - 1)
        if low == high:
            high += 0.001
        ramp = ((torch.arange(dh // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
        inv = inv / c.rope_factor * ramp + inv * (1 - ramp)
        factor = 0.1 * math.log(c.rope_factor) + 1 if c.rope_factor > 1 else 1.0
        return inv, factor
    return inv, 1.0


class Rope(nn.Module):
    """Rotates x (B, H, T, dh): pair i of position t by the angle t * inv_freq[i]. The angles
    are formed in float64 (a float32 angle is off by ~1e-2 radians at t ~ 1e5)."""

    def __init__(self, c: Config):
        super().__init__()
        self.interleaved = c.rope_style == "interleaved"
        inv, factor = rope_frequencies(c)
        angle = torch.arange(c.context, dtype=torch.float64)[:, None] * inv[None, :]
        self.register_buffer("cos", factor * torch.cos(angle), persistent=False)
        self.register_buffer("sin", factor * torch.sin(angle), persistent=False)

    def forward(self, x):
        T = x.shape[-2]
        cos, sin = self.cos[:T].to(x.dtype), self.sin[:T].to(x.dtype)
        if self.interleaved:
            a, b = x[..., 0::2], x[..., 1::2]
            return torch.stack([a * cos - b * sin, b * cos + a * sin], dim=-1).flatten(-2)
        a, b = x.chunk(2, dim=-1)
        return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


def softcap(x, c):
    """c tanh(x / c): x kept inside (-c, c); c = 0 is off."""
    return c * torch.tanh(x / c) if c > 0 else x


def alibi_slopes(heads):
    """(heads,) float64, as Hugging Face's build_alibi_tensor: with n the largest power of two
    <= heads, 2^(-8 (h+1) / n) for h < n, then 2^(-4 (2 (h-n) + 1) / n)."""
    n = 2 ** int(math.floor(math.log2(heads)))
    return torch.tensor([2.0 ** (-8.0 * (h + 1) / n) if h < n else 2.0 ** (-4.0 * (2 * (h - n) + 1) / n)
                         for h in range(heads)], dtype=torch.float64)


class Attention(nn.Module):
    def __init__(self, c: Config, layer=0):
        super().__init__()
        self.heads, self.kv, self.dh, self.scale = c.heads, c.kv, c.dh, c.scale
        self.window = c.layer_window(layer)
        self.softcap = c.attn_softcap
        self.alibi = alibi_slopes(c.heads) if c.positions == "alibi" else None
        self.wq = nn.Linear(c.d_model, c.heads * c.dh, bias=c.attn_qkv_bias)
        self.wk = nn.Linear(c.d_model, c.kv * c.dh, bias=c.attn_qkv_bias)
        self.wv = nn.Linear(c.d_model, c.kv * c.dh, bias=c.attn_qkv_bias)
        self.wo = nn.Linear(c.heads * c.dh, c.d_model, bias=c.attn_out_bias)
        self.q_norm = RMSNorm(c.dh, c.norm_eps) if c.qk_norm else None
        self.k_norm = RMSNorm(c.dh, c.norm_eps) if c.qk_norm else None
        self.rope = Rope(c) if c.positions == "rope" else None

    def forward(self, x):
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, self.heads, self.dh).transpose(1, 2)
        k = self.wk(x).view(B, T, self.kv, self.dh).transpose(1, 2)
        v = self.wv(x).view(B, T, self.kv, self.dh).transpose(1, 2)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rope is not None:
            q, k = self.rope(q), self.rope(k)
        group = self.heads // self.kv  # query head j reads K/V head j // group
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = softcap((q @ k.transpose(-1, -2)) * self.scale, self.softcap)
        i = torch.arange(T, device=x.device)[:, None]
        j = torch.arange(T, device=x.device)[None, :]
        if self.alibi is not None:
            bias = -self.alibi[:, None, None] * (i - j).to(torch.float64)
            scores = scores + bias.to(device=x.device, dtype=scores.dtype)
        allowed = j <= i
        if self.window:
            allowed = allowed & (i - j < self.window)
        weights = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
        out = (weights @ v).transpose(1, 2).reshape(B, T, self.heads * self.dh)
        return self.wo(out)


class GeluMLP(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.fc = nn.Linear(c.d_model, c.hidden, bias=c.mlp_bias)
        self.proj = nn.Linear(c.hidden, c.d_model, bias=c.mlp_bias)

    def forward(self, x):
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class SwiGLU(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.gate = nn.Linear(c.d_model, c.hidden, bias=c.mlp_bias)
        self.up = nn.Linear(c.d_model, c.hidden, bias=c.mlp_bias)
        self.down = nn.Linear(c.hidden, c.d_model, bias=c.mlp_bias)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class GeGLU(SwiGLU):
    def forward(self, x):
        return self.down(F.gelu(self.gate(x), approximate="tanh") * self.up(x))


def make_mlp(c: Config):
    return {"swiglu": SwiGLU, "geglu": GeGLU}.get(c.mlp, GeluMLP)(c)


def top_k_lower_index(p, k):
    """The k largest of each row of p (N, E), equal values in index order: a stable sort,
    since torch.topk does not promise which of two equal values comes first."""
    order = torch.sort(p, dim=-1, descending=True, stable=True).indices[:, :k]
    return torch.gather(p, 1, order), order


class MoE(nn.Module):
    """A Mixtral-style sparse block: the router over all experts, top k, a loop over experts."""

    def __init__(self, c: Config):
        super().__init__()
        self.top_k, self.renorm = c.experts_top_k, c.moe_renorm
        self.router = nn.Linear(c.d_model, c.experts, bias=False)
        self.experts = nn.ModuleList(make_mlp(c) for _ in range(c.experts))

    def forward(self, x):
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        p = torch.softmax(self.router(flat), dim=-1)  # over all experts, never the kept k alone
        weights, chosen = top_k_lower_index(p, self.top_k)
        if self.renorm:
            weights = weights / weights.sum(-1, keepdim=True)
        y = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            token, slot = torch.nonzero(chosen == e, as_tuple=True)
            if token.numel():
                y.index_add_(0, token, expert(flat[token]) * weights[token, slot, None])
        return y.reshape(shape)


class Block(nn.Module):
    def __init__(self, c: Config, layer=0):
        super().__init__()
        self.norm1 = make_norm(c, c.d_model)
        self.attn = Attention(c, layer)
        self.norm1_post = make_norm(c, c.d_model) if c.post_norms else nn.Identity()
        self.attention_only = c.mlp == "none"
        self.residual_multiplier = c.residual_multiplier
        if not self.attention_only:
            self.norm2 = make_norm(c, c.d_model)
            if c.experts > 0 and (layer + 1) % c.moe_every == 0:
                self.moe = MoE(c)
            else:
                self.mlp = make_mlp(c)
            self.norm2_post = make_norm(c, c.d_model) if c.post_norms else nn.Identity()

    def forward(self, x):
        r = self.residual_multiplier
        x = x + self.norm1_post(self.attn(self.norm1(x))) * r
        if self.attention_only:
            return x
        feed_forward = self.moe if hasattr(self, "moe") else self.mlp
        return x + self.norm2_post(feed_forward(self.norm2(x))) * r


class Transformer(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.config = c
        self.tok_emb = nn.Embedding(c.vocab, c.d_model)
        self.pos_emb = nn.Embedding(c.context, c.d_model) if c.positions == "learned" else None
        self.embed_norm = make_norm(c, c.d_model) if c.embed_norm else nn.Identity()
        self.blocks = nn.ModuleList(Block(c, layer) for layer in range(c.layers))
        self.norm_f = make_norm(c, c.d_model)
        self.head = None if c.tie_embeddings else nn.Linear(c.d_model, c.vocab, bias=False)

    def forward(self, tokens):
        """tokens (B, T), T <= context -> logits (B, T, vocab)"""
        T = tokens.shape[1]
        if T > self.config.context:
            raise ValueError(f"Transformer: T={T} exceeds the context of {self.config.context}")
        x = self.tok_emb(tokens)
        if self.config.embed_scale:  # the factor in the model's dtype, as Gemma's normalizer
            x = x * torch.tensor(math.sqrt(self.config.d_model), dtype=x.dtype)
        x = x * self.config.embed_multiplier
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(T, device=tokens.device))
        x = self.embed_norm(x)
        for block in self.blocks:
            x = block(x)
        h = self.norm_f(x)
        logits = h @ self.tok_emb.weight.t() if self.head is None else self.head(h)
        return softcap(logits / self.config.logit_divisor, self.config.final_softcap)

    def loss(self, tokens, targets, ignore_index=-100):
        logits = self(tokens)
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=ignore_index)
