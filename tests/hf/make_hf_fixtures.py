#!/usr/bin/python3
"""Random-weight tiny Hugging Face models, one folder each, made with transformers 4.49.0 and
its save_pretrained: what tests/python/test_hf_parity.py loads into tapegrad and compares
logits with.

  make_hf_fixtures.py OUT_DIR      writes OUT_DIR/<name>/ for every fixture below

Odd sizes throughout; grouped-query attention, tied and untied heads, every RoPE scaling
transformers and tapegrad share but dynamic (unscaled within the context), biases of both
kinds, a Mistral window shorter than the test's longest prompt, a Mixtral of five experts,
a Gemma 2 of three layers (windowed, global, windowed; the window shorter than the longest
prompt, soft-caps small enough to bite, a query_pre_attn_scalar that is not head_dim), a BLOOM
of six heads (ALiBi's slopes for a head count that is not a power of two), a Gemma with one
K/V head, a StarCoder2 with every bias and a window shorter than the longest prompt, a
GPT-Neo of three layers (global, local, global; unscaled scores), a Granite with every
multiplier away from 1; one model saved in two shards (max_shard_size), one in BF16. The weights are drawn again from N(0, 0.2) (norm
gains 1 + N(0, 0.2), Gemma's w, whose gain is 1 + w, N(0, 0.2)): transformers' N(0, 0.02)
leaves attention nearly uniform, where a wrong RoPE pairing or window would hardly move the
logits.
"""
import json
import os
import sys

import torch
from transformers import (BloomConfig, BloomForCausalLM, Gemma2Config, Gemma2ForCausalLM,
                          GemmaConfig, GemmaForCausalLM, GPT2Config, GPT2LMHeadModel,
                          GPTNeoConfig, GPTNeoForCausalLM, GraniteConfig, GraniteForCausalLM,
                          LlamaConfig,
                          LlamaForCausalLM, MistralConfig, MistralForCausalLM, MixtralConfig,
                          MixtralForCausalLM, Qwen2Config, Qwen2ForCausalLM, Starcoder2Config,
                          Starcoder2ForCausalLM)

CONTEXT = 32  # every fixture takes the test's longest prompt, 30 tokens
MISTRAL_WINDOW = 5
GEMMA2_WINDOW = 7
STARCODER2_WINDOW = 6
GPT_NEO_WINDOW = 5


def gpt2(tied):
    return GPT2LMHeadModel, GPT2Config(vocab_size=61, n_positions=CONTEXT, n_embd=20, n_layer=2,
                                       n_head=4, n_inner=36, tie_word_embeddings=tied)


def llama(**extra):
    fields = dict(vocab_size=53, hidden_size=24, intermediate_size=40, num_hidden_layers=2,
                  num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=CONTEXT,
                  rms_norm_eps=1e-6, tie_word_embeddings=False)
    fields.update(extra)
    return LlamaForCausalLM, LlamaConfig(**fields)


def mistral():
    return MistralForCausalLM, MistralConfig(
        vocab_size=47, hidden_size=24, intermediate_size=36, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=CONTEXT,
        sliding_window=MISTRAL_WINDOW, tie_word_embeddings=False)


def mixtral():
    return MixtralForCausalLM, MixtralConfig(
        vocab_size=41, hidden_size=20, intermediate_size=28, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=6, max_position_embeddings=CONTEXT,
        num_local_experts=5, num_experts_per_tok=2, sliding_window=None,
        tie_word_embeddings=False)


def qwen2():
    return Qwen2ForCausalLM, Qwen2Config(
        vocab_size=43, hidden_size=24, intermediate_size=44, num_hidden_layers=2,
        num_attention_heads=6, num_key_value_heads=3, max_position_embeddings=CONTEXT,
        tie_word_embeddings=True)


def gemma2():
    # heads * head_dim = 32 != hidden_size 24; torch 1.13 runs Gemma 2 only without its cache
    return Gemma2ForCausalLM, Gemma2Config(
        vocab_size=37, hidden_size=24, intermediate_size=40, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=CONTEXT,
        query_pre_attn_scalar=10, sliding_window=GEMMA2_WINDOW, attn_logit_softcapping=4.0,
        final_logit_softcapping=5.0, rope_theta=1000.0, tie_word_embeddings=True, use_cache=False,
        attn_implementation="eager")


def gemma():
    # one K/V head (MQA, as Gemma 2B); heads * head_dim = 32 != hidden_size 24
    return GemmaForCausalLM, GemmaConfig(
        vocab_size=39, hidden_size=24, intermediate_size=36, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=1, head_dim=8, max_position_embeddings=CONTEXT,
        hidden_act="gelu_pytorch_tanh", rope_theta=500.0, tie_word_embeddings=True)


def starcoder2():
    return Starcoder2ForCausalLM, Starcoder2Config(
        vocab_size=45, hidden_size=24, intermediate_size=44, num_hidden_layers=2,
        num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=CONTEXT,
        sliding_window=STARCODER2_WINDOW, norm_epsilon=1e-5, tie_word_embeddings=False)


def gpt_neo():
    # global, local, global: a period and a layer left over; scores never scaled
    return GPTNeoForCausalLM, GPTNeoConfig(
        vocab_size=51, max_position_embeddings=CONTEXT, hidden_size=24, num_layers=3,
        num_heads=4, intermediate_size=None, window_size=GPT_NEO_WINDOW,
        attention_types=[[["global", "local"], 1], [["global"], 1]])


def granite():
    # every multiplier away from 1; the scale 0.09 is neither 1/sqrt(head_dim) nor 1
    return GraniteForCausalLM, GraniteConfig(
        vocab_size=49, hidden_size=24, intermediate_size=40, num_hidden_layers=2,
        num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=CONTEXT,
        embedding_multiplier=3.0, residual_multiplier=0.4, logits_scaling=2.5,
        attention_multiplier=0.09, tie_word_embeddings=True)


def bloom():
    return BloomForCausalLM, BloomConfig(vocab_size=59, hidden_size=24, n_layer=2, n_head=6,
                                         tie_word_embeddings=True)


# name -> (model class and config, how it is saved)
FIXTURES = {
    "gpt2_tied": (gpt2(True), {}),
    "gpt2_untied_bf16": (gpt2(False), {"dtype": torch.bfloat16}),
    "llama_gqa": (llama(), {}),
    # head_dim 8 with hidden 28: heads * head_dim != hidden_size; one K/V head (MQA)
    "llama_llama3_tied_sharded": (llama(hidden_size=28, num_attention_heads=4, num_key_value_heads=1,
                                        head_dim=8, tie_word_embeddings=True,
                                        rope_scaling={"rope_type": "llama3", "factor": 4.0,
                                                      "low_freq_factor": 1.0,
                                                      "high_freq_factor": 4.0,
                                                      "original_max_position_embeddings": 8}),
                                  {"shards": 2}),
    "llama_yarn_biases": (llama(rope_scaling={"rope_type": "yarn", "factor": 2.0},
                                attention_bias=True, mlp_bias=True, rope_theta=500.0), {}),
    "llama_linear": (llama(rope_scaling={"type": "linear", "factor": 3.0}), {}),
    "mistral_window": (mistral(), {}),
    "mixtral": (mixtral(), {}),
    "qwen2_tied": (qwen2(), {}),
    "gemma2_window_caps": (gemma2(), {}),
    "bloom_six_heads": (bloom(), {}),
    "gemma_mqa_tied": (gemma(), {}),
    "starcoder2_window_biases": (starcoder2(), {}),
    "gpt_neo_global_local": (gpt_neo(), {}),
    "granite_multipliers": (granite(), {}),
}


def spread(model, seed):
    gen = torch.Generator().manual_seed(seed)
    offset_gain = model.config.model_type in ("gemma", "gemma2")  # their norms multiply by 1 + w
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32) * 0.2
            gain = p.dim() == 1 and ("norm" in name or "ln_" in name) and name.endswith("weight")
            p.copy_(noise + 1.0 if gain and not offset_gain else noise)


def make(name, out_dir, seed):
    (cls, config), how = FIXTURES[name]
    torch.manual_seed(seed)
    model = cls(config).eval()
    spread(model, seed)
    folder = os.path.join(out_dir, name)
    if "dtype" in how:
        model = model.to(how["dtype"])
    options = {}
    if "shards" in how:
        total = sum(p.numel() * p.element_size() for p in model.state_dict().values())
        options["max_shard_size"] = int(total * 0.6)
    model.save_pretrained(folder, safe_serialization=True, **options)
    if "shards" in how:
        with open(os.path.join(folder, "model.safetensors.index.json")) as f:
            shards = set(json.load(f)["weight_map"].values())
        assert len(shards) == how["shards"], shards
    return folder


def make_all(out_dir):
    """{name: folder} for every fixture, written under out_dir."""
    return {name: make(name, out_dir, seed) for seed, name in enumerate(FIXTURES, start=1)}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for name, folder in make_all(sys.argv[1]).items():
        print(name, folder)
