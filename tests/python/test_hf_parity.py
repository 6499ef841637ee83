"""Hugging Face folders against transformers 4.49.0 itself: the random-weight tiny models of
tests/hf/make_hf_fixtures.py (gpt2, llama with linear, llama3 and yarn RoPE, mistral with a
window shorter than the prompts, mixtral, qwen2, gemma2 with its window on layers 0 and 2 and
soft-caps, bloom with six heads, gemma with one K/V head, starcoder2 with biases and a
window, gpt_neo with global and local layers and unscaled scores, granite with its four
multipliers; GQA, tied and untied heads, biases, two shards, BF16), built
into tmp_path at test time, give transformers' logits in tapegrad:

- float32 within 1e-5 of the largest logit, on four prompts (1, 6, 17 and 30 tokens: past
  the Mistral window of 5 and the Gemma 2 window of 7);
- float64 within 1e-12, against transformers' own code run with every float32 it forces
  (RMSNorm's variance, RoPE's angles, ALiBi's slopes, the attention and router softmax,
  GPT-Neo's q and k) made
  float64, and within float32's reach (1e-5) against it as it is; BLOOM within 1e-9, its GELU
  having sqrt(2/pi) cut to 0.79788456 (within 1e-12 with the exact constant);
- an export (save_pretrained) loads in AutoModelForCausalLM with no missing, unexpected or
  mismatched key and the same logits; import -> export -> import is bit for bit; models made
  in tapegrad (interleaved RoPE, the gpt2 preset without attention biases, a windowed Qwen2,
  a Mixtral) export to transformers' logits;
- the traps, shown failing: the same weights read with interleaved RoPE pairs, a Mistral,
  Gemma 2 or StarCoder2 window one key too short or too long, Gemma 2's window on every layer,
  Gemma's norms read as plain RMSNorm (gain w, not 1 + w), GPT-Neo read with
  1/sqrt(head_dim) or with its local layer global and its global layers local, Granite's
  multipliers read as 1 or its residual multiplier applied after the add, BLOOM's
  query_key_value read as [all q | all k | all v] instead of per head, an interleaved model
  written without permuting q and k.

Skips without torch and transformers unless TAPEGRAD_REQUIRE_HF=1 (the test command).
"""
import contextlib
import importlib
import math
import os
import sys

import numpy as np
import pytest
import tapegrad as tg

from conftest import ROOT, require_module

os.environ["HF_HUB_OFFLINE"] = "1"  # the fixtures are local; no test reaches the network
torch = require_module("torch")
transformers = require_module("transformers")
sys.path.insert(0, str(ROOT / "tests" / "hf"))
import make_hf_fixtures  # noqa: E402

if transformers.__version__ != "4.49.0":
    message = (f"the fixtures and the facts they check are transformers 4.49.0's, this is "
               f"{transformers.__version__}")
    if os.environ.get("TAPEGRAD_REQUIRE_HF") == "1":
        pytest.fail(message, pytrace=False)
    pytest.skip(message, allow_module_level=True)

NAMES = list(make_hf_fixtures.FIXTURES)
LLAMA_FAMILY = [n for n in NAMES if not n.startswith("gpt2")]
PROMPT_LENGTHS = (1, 6, 17, 30)
F32, F64 = 1e-5, 1e-12
# BLOOM's GELU multiplies by 0.79788456 where sqrt(2/pi) = 0.7978845608...: a relative 1e-10
F64_OF = {"bloom_six_heads": 1e-9}


@pytest.fixture(scope="session")
def folders(tmp_path_factory):
    return make_hf_fixtures.make_all(str(tmp_path_factory.mktemp("hf_fixtures")))


def prompts(vocab):
    rng = np.random.default_rng(7)
    return [rng.integers(0, vocab, size=(1, n), dtype=np.int64) for n in PROMPT_LENGTHS]


@contextlib.contextmanager
def float32_made_float64():
    """transformers 4.49 forms some values in float32 whatever the model's dtype: RMSNorm's
    variance (hidden_states.to(torch.float32)), RoPE's frequencies and angles (.float(),
    torch.arange(dtype=torch.float32)), the attention softmax (dtype=torch.float32),
    Mixtral's router softmax (dtype=torch.float) and BLOOM's ALiBi slopes
    (torch.tensor(..., dtype=torch.float32)). Within this block each of those asks for
    float64 instead, so a float64 model runs transformers' own code in float64 throughout.
    The model must be built inside it too: RoPE's frequencies are made at construction."""
    F = torch.nn.functional
    real = torch.Tensor.to, torch.Tensor.float, F.softmax, torch.arange, torch.tensor

    def wider(dtype):
        return torch.float64 if dtype is torch.float32 else dtype

    def to(self, *args, **kwargs):
        args = tuple(wider(a) for a in args)
        if "dtype" in kwargs:
            kwargs["dtype"] = wider(kwargs["dtype"])
        return real[0](self, *args, **kwargs)

    def float_(self, *args, **kwargs):
        return real[0](self, torch.float64)

    def softmax(input, dim=None, _stacklevel=3, dtype=None):
        return real[2](input, dim=dim, dtype=wider(dtype))

    def widening(make):
        def made(*args, **kwargs):
            if "dtype" in kwargs:
                kwargs["dtype"] = wider(kwargs["dtype"])
            return make(*args, **kwargs)
        return made

    names = (torch.Tensor, "to"), (torch.Tensor, "float"), (F, "softmax"), (torch, "arange"), \
        (torch, "tensor")
    for (owner, name), new in zip(names, (to, float_, softmax, widening(real[3]),
                                          widening(real[4]))):
        setattr(owner, name, new)
    try:
        yield
    finally:
        for (owner, name), old in zip(names, real):
            setattr(owner, name, old)


def reference_logits(folder, dtype, tokens, widened=False):
    """transformers' logits for each prompt: eager attention, no cache."""
    with float32_made_float64() if widened else contextlib.nullcontext():
        model = transformers.AutoModelForCausalLM.from_pretrained(
            folder, torch_dtype=dtype, attn_implementation="eager", local_files_only=True).eval()
        model.config.use_cache = False
        with torch.no_grad():
            return [model(torch.from_numpy(t), use_cache=False).logits.numpy() for t in tokens]


def tapegrad_logits(model, tokens):
    return [model(t).numpy() for t in tokens]


def relative_error(got, want):
    """max |got - want| / max |want| over all the prompts' logits."""
    err = max(float(np.abs(g.astype(np.float64) - w).max()) for g, w in zip(got, want))
    return err / max(float(np.abs(w).max()) for w in want)


def vocab_of(model):
    return model.forward(np.zeros((1, 1), dtype=np.int64)).shape[-1]


# ---- import --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_float32_logits_equal_transformers(folders, name):
    model = tg.nn.Transformer.from_pretrained(folders[name])
    assert name == model.hf_model_type or name.startswith(model.hf_model_type + "_")
    tokens = prompts(vocab_of(model))
    err = relative_error(tapegrad_logits(model, tokens),
                         reference_logits(folders[name], torch.float32, tokens))
    print(f"{name} float32: {err:.3g}")
    assert err <= F32


@pytest.mark.parametrize("name", NAMES)
def test_float64_logits_equal_transformers_in_float64(folders, name):
    model = tg.nn.Transformer.from_pretrained(folders[name], dtype="float64")
    tokens = prompts(vocab_of(model))
    mine = tapegrad_logits(model, tokens)
    assert mine[0].dtype == np.float64
    err = relative_error(mine, reference_logits(folders[name], torch.float64, tokens, widened=True))
    as_is = relative_error(mine, reference_logits(folders[name], torch.float64, tokens))
    print(f"{name} float64: {err:.3g} (transformers as it is: {as_is:.3g})")
    assert err <= F64_OF.get(name, F64)
    # as it is, transformers' float32 intermediates bound the agreement (GPT-2 has none)
    assert as_is <= F32
    if name in LLAMA_FAMILY:
        assert as_is > 1e-10


def test_bloom_float64_differs_only_by_its_gelu_constant(folders, monkeypatch):
    # with sqrt(2/pi) in place of BLOOM's 0.79788456, float64 agrees as the others do
    bloom = importlib.import_module("transformers.models.bloom.modeling_bloom")
    c = math.sqrt(2 / math.pi)
    monkeypatch.setattr(bloom, "bloom_gelu_forward",
                        lambda x: x * 0.5 * (1.0 + torch.tanh(c * x * (1 + 0.044715 * x * x))))
    model = tg.nn.Transformer.from_pretrained(folders["bloom_six_heads"], dtype="float64")
    tokens = prompts(vocab_of(model))
    err = relative_error(tapegrad_logits(model, tokens),
                         reference_logits(folders["bloom_six_heads"], torch.float64, tokens, widened=True))
    print(f"bloom float64 with sqrt(2/pi) in its GELU: {err:.3g}")
    assert err <= F64


def test_the_sharded_and_bf16_fixtures_are_what_they_say(folders):
    assert os.path.exists(os.path.join(folders["llama_llama3_tied_sharded"],
                                       "model.safetensors.index.json"))
    assert not os.path.exists(os.path.join(folders["llama_llama3_tied_sharded"], "model.safetensors"))
    bf16 = tg._tapegrad.read_safetensors(os.path.join(folders["gpt2_untied_bf16"], "model.safetensors"))
    weight = bf16["transformer.h.0.attn.c_attn.weight"].astype(np.float32)
    assert np.all(weight.view(np.uint32) & 0xFFFF == 0)  # bfloat16 values: 16 low bits zero


# ---- export --------------------------------------------------------------------------------

def parameters(model):
    return {name: p.numpy() for name, p in model.named_parameters()}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", NAMES)
def test_export_loads_in_transformers_and_reads_back_bit_for_bit(folders, tmp_path, name, dtype):
    model = tg.nn.Transformer.from_pretrained(folders[name], dtype=dtype)
    out = tmp_path / "export"
    model.save_pretrained(out)
    torch_dtype = torch.float32 if dtype == "float32" else torch.float64
    with float32_made_float64() if dtype == "float64" else contextlib.nullcontext():
        _, info = transformers.AutoModelForCausalLM.from_pretrained(
            out, torch_dtype=torch_dtype, attn_implementation="eager", local_files_only=True,
            output_loading_info=True)
    assert {key: list(value) for key, value in info.items()} == {
        "missing_keys": [], "unexpected_keys": [], "mismatched_keys": [], "error_msgs": []}
    tokens = prompts(vocab_of(model))
    err = relative_error(tapegrad_logits(model, tokens),
                         reference_logits(str(out), torch_dtype, tokens, widened=dtype == "float64"))
    print(f"{name} exported {dtype}: {err:.3g}")
    assert err <= (F32 if dtype == "float32" else F64_OF.get(name, F64))
    again = tg.nn.Transformer.from_pretrained(out, dtype=dtype)
    assert again.hf_model_type == model.hf_model_type
    first, second = parameters(model), parameters(again)
    assert first.keys() == second.keys()
    for key in first:
        np.testing.assert_array_equal(second[key], first[key], err_msg=key)


def spread_weights(model, tmp_path, seed, **config_changes):
    """The model's weights drawn from N(0, 0.3) (norm gains 1 + N(0, 0.3)), through a
    checkpoint: tapegrad's N(0, 0.02) leaves attention nearly uniform, where a wrong RoPE
    pairing would hardly show. config_changes rewrites __config__ entries on the way."""
    path = str(tmp_path / f"spread{seed}.npz")
    model.save(path)
    with np.load(path) as f:
        entries = {k: f[k] for k in f.files}
    rng = np.random.default_rng(seed)
    for key, value in entries.items():
        if key.startswith("__config__."):
            continue
        gain = "norm" in key and key.endswith(".weight")
        entries[key] = ((1.0 if gain else 0.0) + 0.3 * rng.standard_normal(value.shape)).astype(value.dtype)
    for field, value in config_changes.items():
        entries["__config__." + field] = np.array(value, dtype=entries["__config__." + field].dtype)
    np.savez(path, **entries)
    return tg.nn.load_checkpoint(path, dtype="float32" if model.parameters()[0].dtype == "float32" else "float64")


def tapegrad_made(name):
    small = dict(vocab=29, context=24, d_model=20, heads=4, layers=2, mlp_hidden=28, seed=3)
    if name == "gpt2_preset":  # no attention biases: written as zeros
        return tg.nn.Config.preset("gpt2", **small)
    if name == "llama_interleaved_gqa":
        return tg.nn.Config.preset("llama", kv_heads=2, head_dim=6, rope_style="interleaved", **small)
    if name == "qwen2_window":
        return tg.nn.Config.preset("llama", kv_heads=2, head_dim=6, window=4, attn_qkv_bias=True, **small)
    if name == "gemma2_preset":  # the window (12, half the context) on layer 0 only
        return tg.nn.Config.preset("gemma2", head_dim=6, **small)
    if name == "bloom_five_heads":  # BLOOM's feed-forward is 4 x hidden_size wide
        return tg.nn.Config.preset("bloom", **dict(small, heads=5, mlp_hidden=80))
    if name == "gemma_preset":
        return tg.nn.Config.preset("gemma", kv_heads=1, head_dim=6, **small)
    if name == "granite_multiplied":  # the multipliers on a llama
        return tg.nn.Config.preset("llama", kv_heads=2, head_dim=6, attention_scale=0.2,
                                   embed_multiplier=2.0, residual_multiplier=0.5,
                                   logit_divisor=3.0, **small)
    if name == "gpt_neo_preset":  # the window (12, half the context) on layer 1 only
        return tg.nn.Config.preset("gpt_neo", **small)
    if name == "starcoder2_window":  # no bias on o_proj: written as zeros
        return tg.nn.Config.preset("starcoder2", head_dim=6, window=5, attn_out_bias=False, **small)
    return tg.nn.Config.preset("mixtral", kv_heads=1, experts=3, experts_top_k=2, head_dim=6, **small)


MADE = ["gpt2_preset", "llama_interleaved_gqa", "qwen2_window", "mixtral_mqa", "gemma2_preset",
        "bloom_five_heads", "gemma_preset", "starcoder2_window", "gpt_neo_preset",
        "granite_multiplied"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", MADE)
def test_tapegrad_models_export_to_transformers_logits(tmp_path, name, dtype):
    model = spread_weights(tg.nn.Transformer(tapegrad_made(name), dtype=dtype), tmp_path, 11)
    model.save_pretrained(tmp_path / "export")
    tokens = [t[:, :24] for t in prompts(29)]
    torch_dtype = torch.float32 if dtype == "float32" else torch.float64
    err = relative_error(tapegrad_logits(model, tokens),
                         reference_logits(str(tmp_path / "export"), torch_dtype, tokens,
                                          widened=dtype == "float64"))
    print(f"{name} made in tapegrad, {dtype}: {err:.3g}")
    assert err <= (F32 if dtype == "float32" else 1e-9 if name.startswith("bloom") else F64)


# ---- the traps -----------------------------------------------------------------------------

def rewritten(model, tmp_path, params=None, **config):
    """The model through a checkpoint with the parameters in `params` ({name: array}) and the
    __config__ fields in `config` replaced."""
    path = str(tmp_path / "rewritten.npz")
    model.save(path)
    with np.load(path) as f:
        entries = {k: f[k] for k in f.files}
    for name, value in (params or {}).items():
        assert entries[name].shape == value.shape, name
        entries[name] = value.astype(entries[name].dtype)
    for field, value in config.items():
        entries["__config__." + field] = np.array(value, dtype=entries["__config__." + field].dtype)
    np.savez(path, **entries)
    return tg.nn.load_checkpoint(path)


def test_interleaved_pairs_read_without_permuting_give_other_logits(folders, tmp_path):
    # transformers rotates halves; the same weights read as interleaved pairs
    model = tg.nn.Transformer.from_pretrained(folders["llama_gqa"])
    misread = rewritten(model, tmp_path, rope_style=1)  # interleaved
    tokens = prompts(vocab_of(model))
    reference = reference_logits(folders["llama_gqa"], torch.float32, tokens)
    assert relative_error(tapegrad_logits(model, tokens), reference) <= F32
    err = relative_error(tapegrad_logits(misread, tokens), reference)
    print(f"llama read with interleaved pairs: {err:.3g}")
    assert err > 1e-2


def test_an_interleaved_model_written_without_the_permutation_gives_other_logits(tmp_path):
    model = spread_weights(tg.nn.Transformer(tapegrad_made("llama_interleaved_gqa")), tmp_path, 11)
    # the same weights as a half-pairs model: exported as they are, q and k unpermuted
    unpermuted = spread_weights(tg.nn.Transformer(tapegrad_made("llama_interleaved_gqa")), tmp_path,
                                11, rope_style=0)
    np.testing.assert_array_equal(parameters(unpermuted)["blocks.0.attn.Wq"],
                                  parameters(model)["blocks.0.attn.Wq"])
    unpermuted.save_pretrained(tmp_path / "unpermuted")
    tokens = [t[:, :24] for t in prompts(29)]
    err = relative_error(tapegrad_logits(model, tokens),
                         reference_logits(str(tmp_path / "unpermuted"), torch.float32, tokens))
    print(f"interleaved model written unpermuted: {err:.3g}")
    assert err > 1e-2


WINDOWS = {"mistral_window": make_hf_fixtures.MISTRAL_WINDOW,
           "gemma2_window_caps": make_hf_fixtures.GEMMA2_WINDOW,
           "starcoder2_window_biases": make_hf_fixtures.STARCODER2_WINDOW,
           "gpt_neo_global_local": make_hf_fixtures.GPT_NEO_WINDOW}


@pytest.mark.parametrize("name,window", [("mistral_window", 4), ("mistral_window", 6),
                                         ("gemma2_window_caps", 6), ("gemma2_window_caps", 8),
                                         ("starcoder2_window_biases", 5),
                                         ("starcoder2_window_biases", 7),
                                         ("gpt_neo_global_local", 4),
                                         ("gpt_neo_global_local", 6)])
def test_a_window_off_by_one_gives_other_logits(folders, tmp_path, name, window):
    # sliding_window W: a query sees W keys, its own among them, as tapegrad's window W
    model = tg.nn.Transformer.from_pretrained(folders[name])
    assert model.config.window == WINDOWS[name]
    shifted = rewritten(model, tmp_path, window=window)
    tokens = prompts(vocab_of(model))
    reference = reference_logits(folders[name], torch.float32, tokens)
    # within min(window, W) tokens the windows see the same keys; past it they do not
    short = min(window, WINDOWS[name])
    assert relative_error(tapegrad_logits(shifted, tokens[:1]), reference[:1]) <= F32
    assert relative_error([shifted(tokens[1][:, :short]).numpy()], [reference[1][:, :short]]) <= F32
    err = relative_error(tapegrad_logits(shifted, tokens[2:]), reference[2:])
    print(f"{name} window {window} for {WINDOWS[name]}: {err:.3g}")
    assert err > 1e-3


def test_gemma2_windowed_on_every_layer_gives_other_logits(folders, tmp_path):
    # Gemma 2's window is on layers 0 and 2 only (window_pattern 2); 0 puts it on layer 1 too
    model = tg.nn.Transformer.from_pretrained(folders["gemma2_window_caps"])
    assert model.config.window_pattern == 2
    everywhere = rewritten(model, tmp_path, window_pattern=0)
    tokens = prompts(vocab_of(model))
    reference = reference_logits(folders["gemma2_window_caps"], torch.float32, tokens)
    err = relative_error(tapegrad_logits(everywhere, tokens[2:]), reference[2:])
    print(f"gemma2 windowed on every layer: {err:.3g}")
    assert err > 1e-3


@pytest.mark.parametrize("misreading", ["scaled", "local_first"])
def test_gpt_neo_read_scaled_or_with_its_layers_swapped_gives_other_logits(folders, tmp_path,
                                                                          misreading):
    # GPT-Neo's scores are q.k unscaled, its layers global, local, global; read with
    # 1/sqrt(head_dim), or with the window on layers 0 and 2 instead of 1
    model = tg.nn.Transformer.from_pretrained(folders["gpt_neo_global_local"])
    assert model.config.attention_scale == 1.0 and model.config.window_global_first
    changes = {"attention_scale": np.nan} if misreading == "scaled" else {"window_global_first": 0}
    misread = rewritten(model, tmp_path, **changes)
    tokens = prompts(vocab_of(model))
    reference = reference_logits(folders["gpt_neo_global_local"], torch.float32, tokens)
    long = tokens[2:] if misreading == "local_first" else tokens
    err = relative_error(tapegrad_logits(misread, long), reference[len(tokens) - len(long):])
    print(f"gpt_neo read {misreading}: {err:.3g}")
    assert err > 1e-3


@pytest.mark.parametrize("field", ["embed_multiplier", "residual_multiplier", "logit_divisor",
                                   "attention_scale"])
def test_granite_read_without_one_multiplier_gives_other_logits(folders, tmp_path, field):
    # each of Granite's four numbers moves the logits: the same weights with one of them 1
    model = tg.nn.Transformer.from_pretrained(folders["granite_multipliers"])
    assert getattr(model.config, field) != 1.0
    misread = rewritten(model, tmp_path, **{field: 1.0})
    tokens = prompts(vocab_of(model))
    reference = reference_logits(folders["granite_multipliers"], torch.float32, tokens)
    err = relative_error(tapegrad_logits(misread, tokens), reference)
    print(f"granite read with {field} 1: {err:.3g}")
    assert err > 1e-3


def test_granite_residual_multiplier_after_the_add_gives_other_logits(folders, monkeypatch):
    # Granite multiplies each sub-layer's output before the add: x + r f(x). A model that
    # multiplies after it, (x + f(x)) r, computes other logits from the same folder.
    granite = importlib.import_module("transformers.models.granite.modeling_granite")

    def after_the_add(self, hidden_states, attention_mask=None, position_ids=None,
                      past_key_value=None, output_attentions=False, use_cache=False,
                      cache_position=None, position_embeddings=None, **kwargs):
        r = self.residual_multiplier
        attended, _ = self.self_attn(
            hidden_states=self.input_layernorm(hidden_states), attention_mask=attention_mask,
            position_ids=position_ids, past_key_value=past_key_value,
            output_attentions=output_attentions, use_cache=use_cache,
            cache_position=cache_position, position_embeddings=position_embeddings, **kwargs)
        hidden_states = (hidden_states + attended) * r
        hidden_states = (hidden_states + self.mlp(self.post_attention_layernorm(hidden_states))) * r
        return (hidden_states,)

    model = tg.nn.Transformer.from_pretrained(folders["granite_multipliers"])
    tokens = prompts(vocab_of(model))
    right = reference_logits(folders["granite_multipliers"], torch.float32, tokens)
    assert relative_error(tapegrad_logits(model, tokens), right) <= F32
    monkeypatch.setattr(granite.GraniteDecoderLayer, "forward", after_the_add)
    wrong = reference_logits(folders["granite_multipliers"], torch.float32, tokens)
    err = relative_error(tapegrad_logits(model, tokens), wrong)
    print(f"granite with the residual multiplier after the add: {err:.3g}")
    assert err > 1e-2


def test_gemma_norms_read_as_plain_rmsnorm_give_other_logits(folders, tmp_path):
    # Gemma's RMSNorm multiplies by 1 + w: the same w read as a plain RMSNorm's gain
    model = tg.nn.Transformer.from_pretrained(folders["gemma_mqa_tied"])
    assert model.config.norm == "gemma"
    plain = rewritten(model, tmp_path, norm=1)  # rms
    tokens = prompts(vocab_of(model))
    reference = reference_logits(folders["gemma_mqa_tied"], torch.float32, tokens)
    err = relative_error(tapegrad_logits(plain, tokens), reference)
    print(f"gemma norms read as plain RMSNorm: {err:.3g}")
    assert err > 1e-2


def test_bloom_query_key_value_read_as_q_k_v_blocks_gives_other_logits(folders, tmp_path):
    # query_key_value's rows are per head [q k v]; read as [all q | all k | all v] instead
    folder = folders["bloom_six_heads"]
    model = tg.nn.Transformer.from_pretrained(folder)
    file = tg._tapegrad.read_safetensors(os.path.join(folder, "model.safetensors"))
    d = model.config.d_model
    blocks = {}
    for layer in range(model.config.layers):
        fused = f"transformer.h.{layer}.self_attention.query_key_value."
        weight, bias = file[fused + "weight"], file[fused + "bias"]
        assert weight.shape == (3 * d, d)
        for i, part in enumerate("qkv"):
            blocks[f"blocks.{layer}.attn.W{part}"] = weight[i * d:(i + 1) * d].T
            blocks[f"blocks.{layer}.attn.b{part}"] = bias[i * d:(i + 1) * d]
    misread = rewritten(model, tmp_path, blocks)
    tokens = prompts(vocab_of(model))
    reference = reference_logits(folder, torch.float32, tokens)
    assert relative_error(tapegrad_logits(model, tokens), reference) <= F32
    err = relative_error(tapegrad_logits(misread, tokens), reference)
    print(f"bloom query_key_value read as q, k, v blocks: {err:.3g}")
    assert err > 1e-2


# ---- an imported model is an ordinary model ------------------------------------------------

@pytest.mark.parametrize("name", ["gpt2_tied", "mixtral"])
def test_hooks_work_on_an_imported_model(folders, name):
    model = tg.nn.Transformer.from_pretrained(folders[name])
    tokens = prompts(vocab_of(model))[2]
    logits, cache = tg.run_with_cache(model, tokens)
    np.testing.assert_array_equal(logits.numpy(), model(tokens).numpy())
    pattern = cache["blocks.1.attn.pattern"]
    assert pattern.shape[-2:] == (tokens.shape[1], tokens.shape[1])
    np.testing.assert_allclose(pattern.sum(-1), 1.0, rtol=1e-5)
    ablated = tg.run_with_hooks(model, tokens, {"blocks.0.attn.z": lambda z, _: z * 0})
    assert np.abs(ablated.numpy() - logits.numpy()).max() > 1e-3
