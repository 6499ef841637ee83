"""The transformer of nn/: Config (every field of nn/config.hpp), Transformer in float32 or
float64, AdamW, SGD, clip_grad_norm, WarmupCosine, checkpoints, Hugging Face folders
(Transformer.from_pretrained, model.save_pretrained) and generate."""
import os as _os

from ._tapegrad.nn import (AdamW, Config, SGD, Transformer_float32, Transformer_float64,
                           WarmupCosine, clip_grad_norm, past_context_ok,
                           read_checkpoint_config)
from ._tapegrad.nn import load_checkpoint_float32, load_checkpoint_float64
from ._tapegrad.nn import (hf_model_types, is_pretrained_folder, load_pretrained_float32,
                           load_pretrained_float64, save_pretrained_float32,
                           save_pretrained_float64)
from ._tapegrad import _dtype_name

_MODELS = {"float32": Transformer_float32, "float64": Transformer_float64}


def _model_class(dtype, op):
    return _MODELS[_dtype_name(dtype, op)]


def Transformer(config, dtype="float32"):
    """A decoder-only transformer built from config, its parameters drawn from
    Generator(config.seed) exactly as the C++ Transformer<T>(config) draws them."""
    return _model_class(dtype, "Transformer")(config)


def _from_pretrained(dir, dtype="float32", allow_nonfinite=False):
    double = _dtype_name(dtype, "from_pretrained") == "float64"
    load = load_pretrained_float64 if double else load_pretrained_float32
    model, model_type, kept = load(_os.fspath(dir), allow_nonfinite)
    model.hf_model_type = model_type
    model.hf_kept_json = kept
    return model


_from_pretrained.__doc__ = """The model of a Hugging Face folder (config.json and model.safetensors, or the shards
    model.safetensors.index.json lists) of model_type {types}, its weights converted from
    BF16, F16, F32 or F64. The model keeps hf_model_type and hf_kept_json (the config.json
    fields that change nothing it computes), which its save_pretrained writes back.
    CheckpointError (ValueError) naming the field or the tensor for what tapegrad does not
    map, a missing, unexpected or wrong-shape tensor, a NaN or Inf weight (naming the
    element; allow_nonfinite=True loads it anyway) or pickled weights alone
    (pytorch_model.bin); SafetensorsError (ValueError) for a damaged file.""".format(
    types=", ".join(hf_model_types()[:-1]) + " or " + hf_model_types()[-1])


Transformer.from_pretrained = _from_pretrained


def _save_pretrained(self, dir, kept_json=None):
    """config.json, generation_config.json and model.safetensors (F32 for a float32 model,
    F64 for float64) into dir, created if missing: the model_type the model is (its
    hf_model_type while that still expresses it), an interleaved-RoPE model with its q and k
    rows permuted to Hugging Face's half rotation. kept_json (default: the model's
    hf_kept_json, from from_pretrained) adds the fields that change nothing. CheckpointError
    (ValueError) naming the field when no supported model_type expresses the model; nothing
    is written then."""
    if kept_json is None:
        kept_json = getattr(self, "hf_kept_json", "")
    save = save_pretrained_float64 if isinstance(self, Transformer_float64) else save_pretrained_float32
    save(self, _os.fspath(dir), kept_json)


Transformer_float32.save_pretrained = _save_pretrained
Transformer_float64.save_pretrained = _save_pretrained


def load_checkpoint(path, dtype="float32", allow_nonfinite=False):
    """A new model built from the checkpoint's configuration, with its parameters.
    CheckpointError (ValueError) when the file does not fit or a parameter holds NaN or
    Inf (unless allow_nonfinite), NpzError (OSError) when it is missing or not a readable
    .npz."""
    double = _dtype_name(dtype, "load_checkpoint") == "float64"
    return (load_checkpoint_float64 if double else load_checkpoint_float32)(path, allow_nonfinite)


def save_checkpoint(path, model, task=None):
    """model.save(path, task): task (a tasks.SequenceTask or its name) is recorded as the
    trainer records it, so that generate reads a task prompt and prints the answer."""
    model.save(path, task)


def preset(name, **fields):
    return Config.preset(name, **fields)


__all__ = ["AdamW", "Config", "SGD", "Transformer", "WarmupCosine", "clip_grad_norm",
           "load_checkpoint", "save_checkpoint", "read_checkpoint_config", "preset",
           "past_context_ok", "is_pretrained_folder", "hf_model_types"]
