"""tools/torch_model.py against tapegrad in float64, logits and every parameter's gradient,
on the gemma2 and bloom presets and each of their parts on its own (gemma norm, embed_norm,
embed_scale, post_norms, geglu, window_pattern, query_scale). The weights are spread to
order one (the initialisation leaves attention nearly uniform and gemma's gains at exactly
1, where a missing part could hide); the same numbers go to both through a tapegrad
checkpoint. And the traps: the window on the other layers, or gemma's gain read as w
instead of 1 + w, give other logits."""
import os
import sys

import numpy as np
import pytest
import tapegrad as tg
from tapegrad import nn

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
import to_torch  # noqa: E402
import torch_model  # noqa: E402

SIZES = dict(vocab=13, context=12, d_model=16, heads=4, layers=4, seed=7)
CASES = {
    "gemma2": ("gemma2", {}),
    "bloom": ("bloom", {}),
    "gemma norm": ("llama", dict(norm="gemma")),
    "embed_norm rms": ("llama", dict(embed_norm=True)),
    "embed_norm layer, learned positions": ("gpt2", dict(embed_norm=True)),
    "embed_scale untied": ("llama", dict(embed_scale=True)),
    "embed_scale tied": ("llama", dict(embed_scale=True, tie_embeddings=True)),
    "post_norms": ("llama", dict(post_norms=True)),
    "post_norms attention-only": ("gpt2", dict(post_norms=True, mlp="none")),
    "geglu with biases": ("gpt2", dict(mlp="geglu")),
    "window_pattern 2": ("llama", dict(window=3, window_pattern=2)),
    "window_pattern 3": ("llama", dict(window=2, window_pattern=3)),
    "query_scale": ("llama", dict(query_scale=0.9)),
}


def spread(model, rng):
    """Every parameter from N(0, 0.3); the 1-d ones but biases around 1 (gains), gemma's
    around 0 (its gain is 1 + w)."""
    gemma = model.config.norm == "gemma"
    out = {}
    for name, p in model.named_parameters():
        centre = 1.0 if p.ndim == 1 and "bias" not in name.rsplit(".", 1)[-1] and not gemma else 0.0
        out[name] = centre + 0.3 * rng.standard_normal(p.shape)
    return out


def models(preset, fields, tmp_path, rng):
    """The same weights in a tapegrad float64 model and a torch_model module in float64."""
    built = nn.Transformer(nn.Config.preset(preset, **SIZES, **fields), dtype="float64")
    path = str(tmp_path / "model.npz")
    built.save(path)
    with np.load(path) as f:
        entries = {k: f[k] for k in f.files if k.startswith(to_torch.PREFIX)}
    weights = spread(built, rng)
    np.savez(path, **entries, **weights)
    ours = nn.load_checkpoint(path, dtype="float64")
    theirs = torch_model.Transformer(to_torch.config_from_npz(entries, path)).double()
    state = {}
    for name, w in weights.items():
        tname, transposed = to_torch.torch_name(name)
        state[tname] = torch.from_numpy(np.ascontiguousarray(w.T if transposed else w))
    theirs.load_state_dict(state)  # strict: every name on both sides
    return ours, theirs, weights


def batch(c, rng):
    seq = rng.integers(0, c.vocab, size=(3, c.context + 1))
    return seq[:, :-1], seq[:, 1:]


@pytest.mark.parametrize("case", list(CASES))
def test_torch_model_equals_tapegrad_in_float64(case, tmp_path):
    preset, fields = CASES[case]
    rng = np.random.default_rng(list(CASES).index(case))
    ours, theirs, weights = models(preset, fields, tmp_path, rng)
    tokens, targets = batch(ours.config, rng)
    logits = ours(tokens).numpy()
    loss = ours.loss(tokens, targets)
    loss.backward()
    t_tokens = torch.from_numpy(tokens)
    t_logits = theirs(t_tokens)
    t_loss = theirs.loss(t_tokens, torch.from_numpy(targets))
    t_loss.backward()
    scale = np.abs(logits).max()
    assert np.abs(t_logits.detach().numpy() - logits).max() <= 1e-12 * scale
    assert abs(t_loss.item() - loss.item()) <= 1e-12 * abs(loss.item())
    grads = dict(theirs.named_parameters())
    for name, p in ours.named_parameters():
        tname, transposed = to_torch.torch_name(name)
        g = grads[tname].grad.numpy()
        g = g.T if transposed else g
        assert np.abs(p.grad - g).max() <= 1e-11 * max(np.abs(g).max(), 1e-3), name
    assert len(grads) == len(weights)


def logits_of(preset, fields, tmp_path, edit=None):
    """tapegrad's and (after edit(module)) torch_model's float64 logits on one batch."""
    rng = np.random.default_rng(3)
    ours, theirs, _ = models(preset, fields, tmp_path, rng)
    if edit:
        edit(theirs)
    tokens, _ = batch(ours.config, rng)
    with torch.no_grad():
        return ours(tokens).numpy(), theirs(torch.from_numpy(tokens)).numpy()


def test_the_window_on_the_odd_layers_is_another_model(tmp_path):
    def odd_layers_windowed(module):
        for layer, block in enumerate(module.blocks):
            block.attn.window = 3 if layer % 2 == 1 else 0

    right, same = logits_of("llama", dict(window=3, window_pattern=2), tmp_path)
    _, wrong = logits_of("llama", dict(window=3, window_pattern=2), tmp_path, odd_layers_windowed)
    scale = np.abs(right).max()
    assert np.abs(same - right).max() <= 1e-12 * scale
    assert np.abs(wrong - right).max() > 1e-3 * scale


def test_gemma_gain_read_as_w_is_another_model(tmp_path):
    def gain_w(module):
        for m in module.modules():
            if isinstance(m, torch_model.RMSNorm):
                m.offset = 0.0

    right, _ = logits_of("gemma2", {}, tmp_path)
    _, wrong = logits_of("gemma2", {}, tmp_path, gain_w)
    assert np.abs(wrong - right).max() > 1e-3 * np.abs(right).max()


def test_the_presets_hold_their_parts():
    g = nn.Config.preset("gemma2", **SIZES)
    assert (g.norm, g.mlp, g.post_norms, g.embed_scale, g.tie_embeddings) == \
        ("gemma", "geglu", True, True, True)
    assert (g.window, g.window_pattern, g.attn_softcap, g.final_softcap) == (6, 2, 50, 30)
    assert g.kv_heads == 2
    b = nn.Config.preset("bloom", **SIZES)
    assert (b.positions, b.embed_norm, b.attn_qkv_bias, b.attn_out_bias, b.norm) == \
        ("alibi", True, True, True, "layer")
    # gemma2's window is context / 2 unless given
    assert nn.Config.preset("gemma2", **dict(SIZES, window=4)).window == 4
    with pytest.raises(tg.ShapeError, match="window_pattern"):
        nn.Transformer(nn.Config.preset("llama", **dict(SIZES, window=3, window_pattern=5)))
