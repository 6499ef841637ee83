"""The transformer of nn/: Config (every field of nn/config.hpp), Transformer in float32 or
float64, AdamW, SGD, clip_grad_norm, WarmupCosine, checkpoints and generate."""
from ._tapegrad.nn import (AdamW, Config, SGD, Transformer_float32, Transformer_float64,
                           WarmupCosine, clip_grad_norm, past_context_ok,
                           read_checkpoint_config)
from ._tapegrad.nn import load_checkpoint_float32, load_checkpoint_float64
from ._tapegrad import _dtype_name

_MODELS = {"float32": Transformer_float32, "float64": Transformer_float64}


def _model_class(dtype, op):
    return _MODELS[_dtype_name(dtype, op)]


def Transformer(config, dtype="float32"):
    """A decoder-only transformer built from config, its parameters drawn from
    Generator(config.seed) exactly as the C++ Transformer<T>(config) draws them."""
    return _model_class(dtype, "Transformer")(config)


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
           "past_context_ok"]
