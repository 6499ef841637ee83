#pragma once
// Each family's descriptor, defined in its own file of this folder and listed in registry.cpp.
#include "nn/io/hf/decoder.hpp"
#include "nn/io/hf/family.hpp"
#include "nn/io/hf/rows.hpp"

namespace tapegrad::hf {

const Family& gpt2_family();
const Family& gpt_neo_family();
const Family& bloom_family();
const Family& gemma2_family();
const Family& gemma_family();
const Family& granite_family();
const Family& mixtral_family();
const Family& starcoder2_family();
const Family& qwen2_family();
const Family& mistral_family();
const Family& llama_family();

// What only GPT-Neo writes of a model with learned positions: a window, over unscaled
// scores (GPT-2, which has no window, claims the others).
bool has_gpt_neo_marks(const TransformerConfig& c);

// GPT-2's parts, which GPT-Neo shares: learned positions, LayerNorm, GELU, no experts, one
// K/V head per query head, heads d_model/heads wide.
std::vector<Requirement> gpt2_layout_requirements();

// Mistral's requirements, which Mixtral shares (with experts).
std::vector<Requirement> mistral_requirements(bool experts);

}  // namespace tapegrad::hf
