#!/usr/bin/env python3
"""Induction heads from Python, through the hook points: a 2-layer attention-only model
(RoPE, 2 heads per layer) trained on random segments repeated once after a random prefix,
then each head's induction and previous-token scores from run_with_cache, and the repeat's
loss with each head zeroed through run_with_hooks. The same study as
build/examples/induction (docs/HOOKS.md), in a few dozen lines.

    python3 examples/python/induction_heads.py --steps 1500 --plot pattern.png

--plot draws layer 1's attention pattern on one held-out sequence (needs matplotlib)."""
import argparse

import numpy as np
import tapegrad as tg
from tapegrad import nn


def sequences(rng, batch, half, vocab):
    """tokens and next-token targets (batch, 2 half - 1); each row's copy start and period"""
    tokens, starts, periods = [], [], []
    for _ in range(batch):
        n = int(rng.integers(max(2, half // 2), half + 1))
        prefix = rng.integers(0, vocab, 2 * (half - n))
        segment = rng.integers(0, vocab, n)
        tokens.append(np.concatenate([prefix, segment, segment]))
        starts.append(2 * (half - n))
        periods.append(n)
    seq = np.array(tokens)
    return seq[:, :-1], seq[:, 1:], starts, periods


def head_scores(pattern, starts, periods):
    """pattern (B, H, T, T) -> per head: mean attention to i-n+1 over the repeat, to i-1"""
    B, H, T, _ = pattern.shape
    induction = [np.mean([pattern[b, h, i, i - n + 1] for b, (s, n) in enumerate(zip(starts, periods))
                          for i in range(s + n, T)]) for h in range(H)]
    previous = [pattern[:, h, np.arange(1, T), np.arange(T - 1)].mean() for h in range(H)]
    return np.array(induction), np.array(previous)


def losses(logits, targets, starts, periods):
    """mean next-token loss over the first copy's and the repeat's targets"""
    logp = logits - logits.max(-1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(-1, keepdims=True))
    first, repeat = [], []
    for b, (s, n) in enumerate(zip(starts, periods)):
        for k in range(n - 1):
            first.append(-logp[b, s + k, targets[b, s + k]])
            repeat.append(-logp[b, s + n + k, targets[b, s + n + k]])
    return float(np.mean(first)), float(np.mean(repeat))


def zero_head(head):
    def hook(z, name):  # z (B, T, heads, dh)
        out = z.numpy()
        out[:, :, head, :] = 0
        return out
    return hook


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--plot", help="a PNG of layer 1's attention pattern")
    a = ap.parse_args()
    half, vocab = 16, 64
    config = nn.Config.preset("gpt2", vocab=vocab, context=2 * half - 1, d_model=64, heads=2,
                              layers=2, mlp="none", positions="rope", seed=a.seed)
    model = nn.Transformer(config)
    opt = nn.AdamW(model.parameters(), 1e-3, (0.9, 0.98), 1e-8, 0.0)
    schedule = nn.WarmupCosine(1e-3, 1e-4, 50, a.steps)
    rng, held_rng = np.random.default_rng(a.seed), np.random.default_rng(12345)
    held = sequences(held_rng, 128, half, vocab)
    for step in range(a.steps):
        tokens, targets, _, _ = sequences(rng, 32, half, vocab)
        opt.lr = schedule(step)
        model.loss(tokens, targets).backward()
        nn.clip_grad_norm(model.parameters(), 1.0)
        opt.step()
        model.zero_grad()

    tokens, targets, starts, periods = held
    with tg.no_grad():
        logits, cache = tg.run_with_cache(model, tokens, names=[
            "blocks.0.attn.pattern", "blocks.1.attn.pattern"])
    first, repeat = losses(logits.numpy(), targets, starts, periods)
    print(f"loss on the first copy {first:.3f}, on the repeat {repeat:.3f} (log vocab {np.log(vocab):.3f})")
    for layer in (0, 1):
        induction, previous = head_scores(cache[f"blocks.{layer}.attn.pattern"], starts, periods)
        for h in range(2):
            with tg.no_grad():
                ablated = tg.run_with_hooks(model, tokens, {f"blocks.{layer}.attn.z": zero_head(h)})
            print(f"L{layer}H{h}: induction {induction[h]:.3f}  previous-token {previous[h]:.3f}  "
                  f"repeat loss with it zeroed {losses(ablated.numpy(), targets, starts, periods)[1]:.3f}")
    if a.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        pattern = cache["blocks.1.attn.pattern"][0]
        fig, axes = plt.subplots(1, pattern.shape[0], figsize=(6 * pattern.shape[0], 6))
        for h, ax in enumerate(axes):
            ax.imshow(pattern[h], cmap="Blues", vmin=0, vmax=1)
            ax.set_title(f"layer 1, head {h}")
            ax.set_xticks(range(tokens.shape[1]), tokens[0], fontsize=6, rotation=90)
            ax.set_yticks(range(tokens.shape[1]), tokens[0], fontsize=6)
        fig.savefig(a.plot, dpi=120, bbox_inches="tight")
        print(f"wrote {a.plot}")


if __name__ == "__main__":
    main()
