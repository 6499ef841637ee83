"""The workloads written as a PyTorch 2.x user writes them: F.scaled_dot_product_attention
with is_causal (its fused CPU kernel; enable_gqa for shared K/V heads), F.rms_norm,
torch.optim.AdamW with its defaults. Shared by torch_eager.py and torch_compile.py, which
differ only in whether the model function goes through torch.compile."""
import math
import re

import numpy as np
import torch
import torch.nn.functional as F
import torch.utils.checkpoint

import common


def info():
    cfg = torch.__config__.show()
    keep = [l.strip() for l in cfg.splitlines()
            if any(k in l for k in ("CPU capability", "MKL-DNN", "OpenMP")) and "Build settings" not in l]
    keep += re.findall(r"BLAS_INFO=[^,]+", cfg)
    return dict(version=torch.__version__, threads=torch.get_num_threads(),
                interop_threads=torch.get_num_interop_threads(), config=keep[:8],
                parallel=torch.__config__.parallel_info().splitlines()[:6])


def _t(ref, key, dtype=None, grad=False):
    a = np.asarray(ref[key])
    t = torch.from_numpy(a.copy())
    if dtype is not None:
        t = t.to(dtype)
    return t.requires_grad_(grad)


def _heads(x, B, T, H):
    return x.view(B, T, H, -1).transpose(1, 2)


def mha(x, Wq, Wk, Wv, Wo, H, KV):
    """(B, T, D) -> (B, T, D): project, causal SDPA over H query and KV key/value heads."""
    B, T, D = x.shape
    q, k, v = _heads(x @ Wq, B, T, H), _heads(x @ Wk, B, T, KV), _heads(x @ Wv, B, T, KV)
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=KV != H)
    return o.transpose(1, 2).reshape(B, T, D) @ Wo


class Mha:
    def __init__(self, w, ref, compile_fn):
        dt = torch.float64 if w["dtype"] == "float64" else torch.float32
        self.w, self.ref, self.bw = w, ref, w["backward"]
        self.p = [_t(ref, k, dt, self.bw) for k in ("x", "Wq", "Wk", "Wv", "Wo")]
        self.G = _t(ref, "G", dt)
        self.f = compile_fn(lambda x, a, b, c, d: mha(x, a, b, c, d, w["H"], w["KV"]))

    def _run(self):
        if not self.bw:
            with torch.no_grad():
                return self.f(*self.p)
        for t in self.p:
            t.grad = None
        y = self.f(*self.p)
        y.backward(self.G)
        return y

    def step(self):
        self._run()

    def check(self):
        y = self._run().detach().numpy()
        return common.check_mha(self.w, self.ref, y, [t.grad.numpy() for t in self.p] if self.bw else [])


class ToyGpt(torch.nn.Module):
    """tapegrad's Transformer (gpt2 preset): token + learned positions, pre-norm blocks with
    bias-free attention and a GELU(tanh) MLP, final LayerNorm, untied head; weights in
    tapegrad's (in, out) layout, loaded by name from the reference."""

    def __init__(self, w, ref):
        super().__init__()
        self.w = w
        names = [k[len("param."):] for k in ref.files if k.startswith("param.")]
        self.names = names
        self.ps = torch.nn.ParameterList([torch.nn.Parameter(_t(ref, "param." + n)) for n in names])
        self.P = dict(zip(names, self.ps))

    def forward(self, tokens, targets):
        w, P = self.w, self.P
        D, H, T = w["d_model"], w["heads"], tokens.shape[1]
        x = P["tok_emb.weight"][tokens] + P["pos_emb.weight"][:T]
        for l in range(w["layers"]):
            b = f"blocks.{l}."
            h = F.layer_norm(x, (D,), P[b + "norm1.weight"], P[b + "norm1.bias"], 1e-5)
            x = x + mha(h, P[b + "attn.Wq"], P[b + "attn.Wk"], P[b + "attn.Wv"], P[b + "attn.Wo"], H, H)
            h = F.layer_norm(x, (D,), P[b + "norm2.weight"], P[b + "norm2.bias"], 1e-5)
            h = F.gelu(h @ P[b + "mlp.fc.weight"] + P[b + "mlp.fc.bias"], approximate="tanh")
            x = x + h @ P[b + "mlp.proj.weight"] + P[b + "mlp.proj.bias"]
        x = F.layer_norm(x, (D,), P["norm_f.weight"], P["norm_f.bias"], 1e-5)
        logits = x @ P["head.weight"]
        return F.cross_entropy(logits.reshape(-1, w["vocab"]), targets.reshape(-1))


class Conv1D(torch.nn.Module):
    """transformers' Conv1D (pytorch_utils.py): a Linear whose weight is (in, out), as
    GPT-2's checkpoints store it, applied with addmm."""

    def __init__(self, weight, bias):
        super().__init__()
        self.nf = weight.shape[1]
        self.weight = torch.nn.Parameter(weight)
        self.bias = torch.nn.Parameter(bias)

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


class NewGELUActivation(torch.nn.Module):
    """transformers' gelu_new, GPT-2's activation_function: the tanh GELU as written there."""

    def forward(self, input):
        return 0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))


class GPT2Attention(torch.nn.Module):
    """transformers' GPT2Attention with its default sdpa attention, in training, dropout 0:
    the fused c_attn [q | k | v] with its bias, split, heads, SDPA (is_causal), merge, c_proj."""

    def __init__(self, w, c_attn, c_proj):
        super().__init__()
        self.embed_dim = w["d_model"]
        self.num_heads = w["heads"]
        self.head_dim = self.embed_dim // self.num_heads
        self.split_size = self.embed_dim
        self.scaling = self.head_dim ** -0.5
        self.c_attn, self.c_proj = c_attn, c_proj

    def forward(self, hidden_states):
        query_states, key_states, value_states = self.c_attn(hidden_states).split(self.split_size, dim=2)
        shape_q = (*query_states.shape[:-1], -1, self.head_dim)
        shape_kv = (*key_states.shape[:-1], -1, self.head_dim)
        query_states = query_states.view(shape_q).transpose(1, 2)
        key_states = key_states.view(shape_kv).transpose(1, 2)
        value_states = value_states.view(shape_kv).transpose(1, 2)
        attn_output = F.scaled_dot_product_attention(query_states, key_states, value_states, attn_mask=None,
                                                     dropout_p=0.0, scale=self.scaling, is_causal=True)
        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(*attn_output.shape[:-2], -1).contiguous()
        return self.c_proj(attn_output)


class GPT2MLP(torch.nn.Module):
    def __init__(self, c_fc, c_proj):
        super().__init__()
        self.c_fc, self.c_proj, self.act = c_fc, c_proj, NewGELUActivation()

    def forward(self, hidden_states):
        return self.c_proj(self.act(self.c_fc(hidden_states)))


class GPT2Block(torch.nn.Module):
    def __init__(self, ln_1, attn, ln_2, mlp):
        super().__init__()
        self.ln_1, self.attn, self.ln_2, self.mlp = ln_1, attn, ln_2, mlp

    def forward(self, hidden_states):
        residual = hidden_states
        hidden_states = self.attn(self.ln_1(hidden_states))
        hidden_states = hidden_states + residual
        residual = hidden_states
        feed_forward_hidden_states = self.mlp(self.ln_2(hidden_states))
        return residual + feed_forward_hidden_states


class GPT2LMHeadModel(torch.nn.Module):
    """transformers' GPT2LMHeadModel in training, as its modules compute (GPT2Model: wte + wpe,
    the blocks, ln_f; lm_head tied to wte; the loss on float logits), without dropout, the
    cache or masks (no padding). tapegrad's parameters (Linear weights (in, out), the
    layout of Conv1D) loaded by name; Wq, Wk, Wv and their biases fused into c_attn."""

    def __init__(self, w, ref):
        super().__init__()
        self.w = w
        P = {n: torch.from_numpy(a) for n, a in common.gpt2_params(w, ref).items()}
        D = w["d_model"]

        def ln(prefix):
            m = torch.nn.LayerNorm(D, eps=1e-5)
            m.weight, m.bias = torch.nn.Parameter(P[prefix + ".weight"]), torch.nn.Parameter(P[prefix + ".bias"])
            return m

        def emb(name):
            return torch.nn.Embedding.from_pretrained(P[name], freeze=False)
        self.wte, self.wpe = emb("tok_emb.weight"), emb("pos_emb.weight")
        blocks = []
        for l in range(w["layers"]):
            b = f"blocks.{l}."
            c_attn = Conv1D(torch.cat([P[b + "attn.W" + x] for x in "qkv"], 1),
                            torch.cat([P[b + "attn.b" + x] for x in "qkv"]))
            attn = GPT2Attention(w, c_attn, Conv1D(P[b + "attn.Wo"], P[b + "attn.bo"]))
            mlp = GPT2MLP(Conv1D(P[b + "mlp.fc.weight"], P[b + "mlp.fc.bias"]),
                          Conv1D(P[b + "mlp.proj.weight"], P[b + "mlp.proj.bias"]))
            blocks.append(GPT2Block(ln(b + "norm1"), attn, ln(b + "norm2"), mlp))
        self.h = torch.nn.ModuleList(blocks)
        self.ln_f = ln("norm_f")
        self.lm_head = torch.nn.Linear(D, w["vocab"], bias=False)
        self.lm_head.weight = self.wte.weight  # tie_word_embeddings
        self.names = list(P)

    def forward(self, tokens, targets):
        position_ids = torch.arange(tokens.shape[1]).unsqueeze(0)
        hidden_states = self.wte(tokens) + self.wpe(position_ids)
        for block in self.h:  # _ckpt: each block's input kept, the block recomputed in the backward
            if self.w.get("ckpt"):
                hidden_states = torch.utils.checkpoint.checkpoint(block, hidden_states, use_reentrant=False)
            else:
                hidden_states = block(hidden_states)
        hidden_states = self.ln_f(hidden_states)
        logits = self.lm_head(hidden_states)
        return F.cross_entropy(logits.float().view(-1, self.w["vocab"]), targets.view(-1))

    def grads(self):
        """(tapegrad's name, gradient in tapegrad's layout) for each parameter."""
        D = self.w["d_model"]
        out = [("tok_emb.weight", self.wte.weight.grad), ("pos_emb.weight", self.wpe.weight.grad)]
        for l, blk in enumerate(self.h):
            b = f"blocks.{l}."
            wq, wk, wv = blk.attn.c_attn.weight.grad.split(D, 1)
            bq, bk, bv = blk.attn.c_attn.bias.grad.split(D)
            out += [(b + "norm1.weight", blk.ln_1.weight.grad), (b + "norm1.bias", blk.ln_1.bias.grad),
                    (b + "attn.Wq", wq), (b + "attn.bq", bq), (b + "attn.Wk", wk), (b + "attn.bk", bk),
                    (b + "attn.Wv", wv), (b + "attn.bv", bv),
                    (b + "attn.Wo", blk.attn.c_proj.weight.grad), (b + "attn.bo", blk.attn.c_proj.bias.grad),
                    (b + "norm2.weight", blk.ln_2.weight.grad), (b + "norm2.bias", blk.ln_2.bias.grad),
                    (b + "mlp.fc.weight", blk.mlp.c_fc.weight.grad), (b + "mlp.fc.bias", blk.mlp.c_fc.bias.grad),
                    (b + "mlp.proj.weight", blk.mlp.c_proj.weight.grad),
                    (b + "mlp.proj.bias", blk.mlp.c_proj.bias.grad)]
        out += [("norm_f.weight", self.ln_f.weight.grad), ("norm_f.bias", self.ln_f.bias.grad)]
        if sorted(n for n, _ in out) != sorted(self.names):
            raise common.CheckFailed("the GPT-2 model's parameters are not tapegrad's")
        return [(n, g.numpy()) for n, g in out]


def _rope_tables(w):
    dh = w["d_model"] // w["heads"]
    inv = w["rope_theta"] ** (-torch.arange(0, dh, 2, dtype=torch.float64) / dh)
    ang = torch.outer(torch.arange(w["context"], dtype=torch.float64), inv)
    ang = torch.cat([ang, ang], -1)
    return ang.cos().float(), ang.sin().float()


def _rope(x, cos, sin, start=0):
    """rotate_half RoPE of x (B, heads, T, dh) at positions start .. start+T-1."""
    T, half = x.shape[2], x.shape[3] // 2
    rot = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos[start:start + T] + rot * sin[start:start + T]


def swiglu(h, gate, up, down):
    return (F.silu(h @ gate) * (h @ up)) @ down


def swiglu_of(P, b, h):
    """The SwiGLU whose weights are P[b + "gate.weight"], ... of h."""
    return swiglu(h, P[b + "gate.weight"], P[b + "up.weight"], P[b + "down.weight"])


def llama_logits(w, P, x, attend, feed_forward=None):
    """x (B, T, D) through the llama blocks, the final RMSNorm and the head -> logits.
    attend(l, h) is layer l's attention of its normed input h, (B, T, heads * dh) before Wo;
    feed_forward(l, h) its MLP (by default the dense SwiGLU)."""
    D, eps = w["d_model"], w["norm_eps"]
    feed_forward = feed_forward or (lambda l, h: swiglu_of(P, f"blocks.{l}.mlp.", h))
    for l in range(w["layers"]):
        b = f"blocks.{l}."
        x = x + attend(l, F.rms_norm(x, (D,), P[b + "norm1.weight"], eps)) @ P[b + "attn.Wo"]
        x = x + feed_forward(l, F.rms_norm(x, (D,), P[b + "norm2.weight"], eps))
    return F.rms_norm(x, (D,), P["norm_f.weight"], eps) @ P["head.weight"]


def sparse_moe(w, P, b, h):
    """Mixtral's sparse block as PyTorch users write it: softmax over all experts, top k,
    the k weights renormalised, a loop over experts gathering their tokens and adding
    their outputs back with index_add_; with the layer's load-balancing loss as Hugging
    Face's load_balancing_loss_func (E * sum_e f_e * P_e) and its router z-loss."""
    E, k = w["experts"], w["top_k"]
    flat = h.reshape(-1, h.shape[-1])
    logits = flat @ P[b + "router.weight"]
    probs = torch.softmax(logits, dim=-1)
    weights, chosen = torch.topk(probs, k, dim=-1)
    weights = weights / weights.sum(-1, keepdim=True)
    out = torch.zeros_like(flat)
    expert_mask = F.one_hot(chosen, E).permute(2, 1, 0)  # (E, k, tokens)
    for e in range(E):
        slot, token = torch.where(expert_mask[e])
        gate, up, down = (P[f"{b}experts.{e}.{n}.weight"] for n in ("gate", "up", "down"))
        y = swiglu(flat[token], gate, up, down) * weights[token, slot, None]
        out.index_add_(0, token, y.to(out.dtype))  # under autocast y is bf16, out float32
    f = F.one_hot(chosen, E).float().mean(0).sum(0)  # (E,): the share of tokens sent to e
    aux = E * torch.sum(f * probs.mean(0))
    z = torch.logsumexp(logits, dim=-1).square().mean()
    return out.view_as(h), aux, z


class Llama(torch.nn.Module):
    """The llama preset: RMSNorm, rotate_half RoPE, GQA through SDPA's enable_gqa, SwiGLU,
    no biases, untied head; parameters in bench::llama_parameters' order and layout."""

    def __init__(self, w, ref, prefix):
        super().__init__()
        self.w = w
        names = [k[len("train."):] for k in ref.files if k.startswith("train.")]
        self.ps = torch.nn.ParameterList([torch.nn.Parameter(_t(ref, prefix + n)) for n in names])
        self.P = dict(zip(names, self.ps))
        self.cos, self.sin = _rope_tables(w)

    def attend(self, l, h):
        """Layer l's causal GQA attention of h (B, T, D) -> (B, T, heads * dh), before Wo."""
        w, P, b = self.w, self.P, f"blocks.{l}."
        B, T = h.shape[:2]
        q = _rope(_heads(h @ P[b + "attn.Wq"], B, T, w["heads"]), self.cos, self.sin)
        k = _rope(_heads(h @ P[b + "attn.Wk"], B, T, w["kv_heads"]), self.cos, self.sin)
        v = _heads(h @ P[b + "attn.Wv"], B, T, w["kv_heads"])
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return o.transpose(1, 2).reshape(B, T, -1)

    def forward(self, tokens, targets):
        logits = llama_logits(self.w, self.P, self.P["tok_emb.weight"][tokens], self.attend)
        return F.cross_entropy(logits.reshape(-1, self.w["vocab"]), targets.reshape(-1))


class MoeLlama(Llama):
    """The llama preset with each block's MLP a sparse mixture of experts (sparse_moe). The
    training loss is the LM loss plus aux_coef times the mean load-balancing loss over
    layers plus z_coef times the mean z-loss; forward returns (training loss, LM loss)."""

    def forward(self, tokens, targets):
        w, P = self.w, self.P
        aux, z = [], []

        def feed_forward(l, h):
            out, a, zl = sparse_moe(w, P, f"blocks.{l}.moe.", h)
            aux.append(a)
            z.append(zl)
            return out
        logits = llama_logits(w, P, P["tok_emb.weight"][tokens], self.attend, feed_forward)
        lm = F.cross_entropy(logits.reshape(-1, w["vocab"]), targets.reshape(-1))
        total = lm + w["aux_coef"] * torch.stack(aux).mean() + w["z_coef"] * torch.stack(z).mean()
        return total, lm


class Train:
    """One step = zero_grad, forward + cross-entropy, backward, AdamW (as the C++ programs)."""

    def __init__(self, w, ref, compile_fn):
        self.w, self.ref = w, ref
        seq = torch.from_numpy(np.asarray(ref["tokens"]).copy())
        self.tokens, self.targets = seq[:, :-1].contiguous(), seq[:, 1:].contiguous()
        self.compile_fn = compile_fn
        self.model = self.make("train.")
        self.f = compile_fn(self.model)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=w["lr"], betas=(w["beta1"], w["beta2"]),
                                     eps=w["eps"], weight_decay=w["weight_decay"])
        self.losses = []

    def make(self, prefix):
        if self.w["kind"] == "toygpt":
            return ToyGpt(self.w, self.ref)
        if self.w["kind"] == "gpt2":
            return GPT2LMHeadModel(self.w, self.ref)
        return (MoeLlama if self.w["kind"] == "moe" else Llama)(self.w, self.ref, prefix)

    def loss(self, f, rows):
        """(training loss, LM loss) of the first `rows` sequences: a dense model's are one."""
        out = f(self.tokens[:rows], self.targets[:rows])
        return out if isinstance(out, tuple) else (out, out)

    def step(self):
        """One step; a _bf16 workload runs the forward under torch.autocast("cpu",
        dtype=torch.bfloat16), as PyTorch's docs show (the backward follows its casts)."""
        self.opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.w.get("bf16", False)):
            loss, lm = self.loss(self.f, len(self.tokens))
        loss.backward()
        self.opt.step()
        self.losses.append(lm.item())

    def check(self):
        """TOY-GPT: the timed model's first loss and gradients on the whole batch; llama and
        MoE: the check weights on the first two sequences (tapegrad_bench's start-up check).
        In float32 also for a _bf16 workload: the check is of the model, not the rounding."""
        c = common.TrainCheck(self.w)
        if c.weights is None:
            m, f = self.model, self.f
        else:
            m = self.make(c.weights)
            f = self.compile_fn(m)
        loss, _ = self.loss(f, c.rows)
        loss.backward()
        grads = m.grads() if hasattr(m, "grads") else [(nm, p.grad.numpy()) for nm, p in m.P.items()]
        err = c.compare(self.ref, loss.item(), grads)
        m.zero_grad(set_to_none=True)
        return err


class Flash:
    """Long-context causal attention alone: q, k, v leaves (B, T, H*dh), SDPA is_causal."""

    def __init__(self, w, ref, compile_fn):
        self.w, self.ref = w, ref
        self.p = [_t(ref, k, None, True) for k in ("q", "k", "v")]
        self.dO = _t(ref, "dO")
        H = w["H"]

        def attn(q, k, v):
            B, T, W = q.shape
            o = F.scaled_dot_product_attention(_heads(q, B, T, H), _heads(k, B, T, H), _heads(v, B, T, H),
                                               is_causal=True)
            return o.transpose(1, 2).reshape(B, T, W)
        self.f = compile_fn(attn)

    def _run(self):
        for t in self.p:
            t.grad = None
        out = self.f(*self.p)
        out.backward(self.dO)
        return out

    def step(self):
        self._run()

    def check(self):
        out = self._run().detach().numpy()
        return common.check_flash(self.ref, out, [t.grad.numpy() for t in self.p])


class CachedLlama:
    """The llama preset with a KV cache as a PyTorch user writes one: per layer K and V
    (1, kv_heads, context, head_dim) allocated once; the prompt goes through in one forward
    (SDPA, is_causal) that fills positions 0 .. n-1; a step writes one token's rotated key
    and its value at its position and attends over the cache up to it (SDPA, enable_gqa:
    each query head reads its K/V head in place)."""

    def __init__(self, w, ref, prefix):
        self.w = w
        names = [k[len(prefix):] for k in ref.files if k.startswith(prefix)]
        self.P = {n: _t(ref, prefix + n) for n in names}
        self.cos, self.sin = _rope_tables(w)
        shape = (1, w["kv_heads"], w["context"], w["d_model"] // w["heads"])
        self.K = [torch.zeros(shape) for _ in range(w["layers"])]
        self.V = [torch.zeros(shape) for _ in range(w["layers"])]

    def forward(self, tokens, start):
        """tokens (1, T) at positions start .. start+T-1 -> logits (1, T, vocab)."""
        w, P = self.w, self.P
        T, end = tokens.shape[1], start + tokens.shape[1]

        def attend(l, h):
            b = f"blocks.{l}."
            q = _rope(_heads(h @ P[b + "attn.Wq"], 1, T, w["heads"]), self.cos, self.sin, start)
            self.K[l][:, :, start:end] = _rope(_heads(h @ P[b + "attn.Wk"], 1, T, w["kv_heads"]),
                                               self.cos, self.sin, start)
            self.V[l][:, :, start:end] = _heads(h @ P[b + "attn.Wv"], 1, T, w["kv_heads"])
            o = F.scaled_dot_product_attention(q, self.K[l][:, :, :end], self.V[l][:, :, :end],
                                               is_causal=T > 1, enable_gqa=True)
            return o.transpose(1, 2).reshape(1, T, -1)
        return llama_logits(w, P, P["tok_emb.weight"][tokens], attend)


class Decode:
    """One cached token at a time, as tapegrad_bench's decode: the prompt (context - 1
    tokens) prefilled outside the timed region; each timed step is one token at position
    context - 1 under no_grad and the argmax of its logits (the next step's token). The
    next step writes the same slot again, so every step attends over `context` keys. The
    compiled peer compiles the one-token step (its position is always the same)."""

    def __init__(self, w, ref, compile_fn):
        self.w, self.ref, self.compile_fn = w, ref, compile_fn
        self.tokens = torch.from_numpy(np.asarray(ref["tokens"]).copy()).view(1, -1)
        self.pos = w["context"] - 1
        self.model, self.f = self.prefilled("train.")
        self.tok = self.tokens[:, self.pos:]

    def prefilled(self, prefix):
        m = CachedLlama(self.w, self.ref, prefix)
        with torch.no_grad():
            m.forward(self.tokens[:, :self.pos], 0)
        return m, self.compile_fn(lambda tok: m.forward(tok, self.pos))

    def step(self):
        with torch.no_grad():
            self.tok = self.f(self.tok).argmax(-1)

    def check(self):
        m, f = self.prefilled("check.")
        with torch.no_grad():
            logits = f(self.tokens[:, self.pos:])
        return common.check_decode(self.ref, logits.reshape(-1).numpy())


def build(w, ref, compile_fn):
    table = {"mha": Mha, "toygpt": Train, "llama": Train, "moe": Train, "gpt2": Train, "flash": Flash,
             "decode": Decode}
    return common.builder(table, w, "torch")(w, ref, compile_fn)
