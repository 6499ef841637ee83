#pragma once
// Everything: tapegrad.hpp (the engine and the ops) and nn/: the model's configuration and
// presets, Module, Linear, Embedding, the norms, MLP, SwiGLU, attention, Block, the
// Transformer (and its deprecated old name, nn/tinygpt.hpp) and its parameter plan, init,
// SGD/AdamW, the learning-rate schedule, .npz checkpoints, Hugging Face model folders, the
// KV cache, sampling and generation.
#include "tapegrad.hpp"

#include "nn/block.hpp"
#include "nn/io/checkpoint.hpp"
#include "nn/config.hpp"
#include "nn/generation.hpp"
#include "nn/hooks.hpp"
#include "nn/init.hpp"
#include "nn/interpret.hpp"
#include "nn/kv_cache.hpp"
#include "nn/layers.hpp"
#include "nn/module.hpp"
#include "nn/io/npz.hpp"
#include "nn/io/pretrained.hpp"
#include "nn/optim.hpp"
#include "nn/parameter_plan.hpp"
#include "nn/sampling.hpp"
#include "nn/schedule.hpp"
#include "nn/tinygpt.hpp"
#include "nn/transformer.hpp"
