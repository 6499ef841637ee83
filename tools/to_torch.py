#!/usr/bin/python3
"""Moves a tapegrad checkpoint into PyTorch and back, losing nothing (docs/PORTING.md).

  to_torch.py model.npz [--out model.pt] [--check]   tapegrad -> the torch module of
                                                       tools/torch_model.py (at least one
                                                       of --out and --check)
  to_torch.py model.pt --to-npz model.npz [--check]  a saved torch module -> a tapegrad
                                                       checkpoint

model.pt is torch.save of {"config": the Config's fields, "state_dict": the module's
state_dict, "extras": what else the checkpoint carried (the task, a text vocabulary)}.
Weights move by name; tapegrad stores a Linear's weight (in, out), torch (out, in), so
those are transposed, nothing else changes. The configuration, RoPE's pairing included,
travels with the weights: a model read with the other pairing gives other logits.

--check runs one token batch through tapegrad (build/tools/logits, or --logits-bin) and
through the torch module, in float32, and exits 1 unless the logits agree within 1e-5
of the largest logit and the loss within 1e-6 of itself. Exit codes: 0 done, 1 the check failed,
2 a usage error or an input that does not fit (one line on stderr, nothing written).

A weight holding NaN or Inf is refused, naming it and the element, as tapegrad's programs
refuse it, unless --allow-nonfinite. A training checkpoint (the trainer's ckpt-*.npz) is
refused too: its optimiser state has no place in the module, and converting its weights
alone would lose it without a word; convert the run's model.npz.
"""
import argparse
import dataclasses
import math
import os
import subprocess
import sys
import tempfile
import zipfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_model import (FIELDS, IMPLEMENTED, SCHEMA, Config,  # noqa: E402
                         Transformer, typed)

PROGRAM = "to_torch"
PREFIX = SCHEMA["prefix"]
FORMAT = SCHEMA["format"]
LOGITS_TOLERANCE = 1e-5  # of max |logit|
LOSS_TOLERANCE = 1e-6  # of the loss: float32 holds a loss of ~4 to 4.8e-7
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAINING_PREFIX = "__train__."  # nn/io/checkpoint.hpp's kTrainingPrefix


class UsageError(Exception):
    pass


# ---- the configuration: tapegrad's __config__.* entries <-> Config -------------------------

NAMES = [f["name"] for f in FIELDS]
EXTRAS = set(SCHEMA["extras"])


def config_from_npz(entries, path):
    """The rule of nn/io/checkpoint.hpp: a file of format F holds every field with since <= F;
    a field it predates takes its old value."""
    if PREFIX + "format" not in entries:
        raise UsageError(f"{path}: no {PREFIX}format entry (not a tapegrad checkpoint)")
    fmt = int(entries[PREFIX + "format"])
    if not 1 <= fmt <= FORMAT:
        raise UsageError(f"{path}: checkpoint format {fmt}, this tool reads 1 to {FORMAT}")
    for key in entries:
        name = key[len(PREFIX):]
        if key.startswith(PREFIX) and name not in NAMES and name != "format" and name not in EXTRAS:
            raise UsageError(f"{path}: config entry '{key}' is not a field this tool knows "
                             "(written by a newer version?)")
    c = Config(**{f["name"]: typed(f, f["old"]) for f in FIELDS})
    for field in FIELDS:
        if field["role"] == "execution":  # how a run computes: never stored, the default
            continue
        key = PREFIX + field["name"]
        if key not in entries:
            if field["since"] <= fmt:
                raise UsageError(f"{path}: missing config entry '{key}' (format {fmt} has it)")
            continue
        v = entries[key]
        if v.shape != ():
            raise UsageError(f"{path}: config entry '{key}' has shape {v.shape}, expected one value")
        setattr(c, field["name"], decode_field(field, v, path))
    for field in FIELDS:
        value = getattr(c, field["name"])
        if (field["role"] == "architecture" and field["name"] not in IMPLEMENTED
                and value != typed(field, field["old"])):
            raise UsageError(f"{path}: {field['name']}={value} has no PyTorch counterpart in "
                             "tools/torch_model.py yet")
    return c


def decode_field(field, v, path):
    name, kind = field["name"], field["kind"]
    if kind in ("real", "optional_real"):
        if v.dtype != np.float64:
            raise UsageError(f"{path}: config entry '{PREFIX}{name}' is {v.dtype}, expected float64")
        x = float(v)
        return None if kind == "optional_real" and math.isnan(x) else x
    if v.dtype != np.int64:
        raise UsageError(f"{path}: config entry '{PREFIX}{name}' is {v.dtype}, expected int64")
    i = int(v)
    if kind == "choice":
        if not 0 <= i < len(field["choices"]):
            raise UsageError(f"{path}: config entry '{PREFIX}{name}'={i} is not one of "
                             f"{', '.join(field['choices'])}")
        return field["choices"][i]
    if kind == "flag":
        return bool(i)
    if kind == "seed":
        return i & (2**64 - 1)  # stored as the int64 bit pattern of a uint64
    return i


def config_to_npz(c):
    out = {PREFIX + "format": np.array(FORMAT, dtype=np.int64)}
    for field in FIELDS:
        if field["role"] == "execution":  # not part of the model (nn/io/checkpoint.hpp)
            continue
        name, kind = field["name"], field["kind"]
        v = getattr(c, name)
        if kind in ("real", "optional_real"):
            out[PREFIX + name] = np.array(math.nan if v is None else v, dtype=np.float64)
        elif kind == "choice":
            out[PREFIX + name] = np.array(field["choices"].index(v), dtype=np.int64)
        elif kind == "seed":
            out[PREFIX + name] = np.array(v, dtype=np.uint64).view(np.int64)
        else:
            out[PREFIX + name] = np.array(int(v), dtype=np.int64)
    return out


# ---- the weights: tapegrad names (in, out) <-> torch names (out, in) ------------------------

ATTENTION = {"Wq": "wq.weight", "Wk": "wk.weight", "Wv": "wv.weight", "Wo": "wo.weight",
             "bq": "wq.bias", "bk": "wk.bias", "bv": "wv.bias", "bo": "wo.bias"}


def torch_name(name):
    """(the state_dict's name, whether the matrix is transposed) of a tapegrad parameter."""
    head, _, last = name.rpartition(".")
    if head.endswith(".attn") and last in ATTENTION:
        return f"{head}.{ATTENTION[last]}", last.startswith("W")
    is_linear = ".mlp." in name or ".moe." in name or name == "head.weight"
    return name, is_linear and last == "weight"


def tapegrad_name(name):
    for short, long in ATTENTION.items():
        if name.endswith(".attn." + long):
            return name[: -len(long)] + short, short.startswith("W")
    return torch_name(name)


def require_finite(path, name, array, allow):
    """The programs' check (nn/io/finite_weights.cpp), with their words."""
    bad = np.flatnonzero(~np.isfinite(array))
    if bad.size and not allow:
        shape = "(" + ",".join(str(n) for n in array.shape) + ")"
        raise UsageError(f"{path}: parameter '{name}' {shape} holds {array.flat[bad[0]]} at "
                         f"element {bad[0]} (--allow-nonfinite converts it anyway)")


def to_module(entries, path, allow_nonfinite):
    if any(name.startswith(TRAINING_PREFIX) for name in entries):
        raise UsageError(f"{path}: a training checkpoint (weights with the trainer's "
                         f"{TRAINING_PREFIX}* state, which the torch module has no place "
                         "for); convert the run's model.npz, its final weights")
    c = config_from_npz(entries, path)
    model = Transformer(c)
    wanted = model.state_dict()
    state = {}
    for name, array in entries.items():
        if name.startswith(PREFIX):
            continue
        tname, transposed = torch_name(name)
        if tname not in wanted:
            raise UsageError(f"{path}: entry '{name}' is not a parameter of this model")
        if array.dtype != np.float32:
            raise UsageError(f"{path}: '{name}' is {array.dtype}, expected float32")
        require_finite(path, name, array, allow_nonfinite)
        t = torch.from_numpy(np.ascontiguousarray(array.T if transposed else array))
        if t.shape != wanted[tname].shape:
            raise UsageError(f"{path}: '{name}' has shape {tuple(array.shape)}, the model's is "
                             f"{tuple(wanted[tname].T.shape if transposed else wanted[tname].shape)}")
        state[tname] = t
    missing = sorted(set(wanted) - set(state))
    if missing:
        raise UsageError(f"{path}: no entry for {', '.join(tapegrad_name(n)[0] for n in missing)}")
    model.load_state_dict(state)
    extras = {k: v for k, v in entries.items() if k.startswith(PREFIX) and k[len(PREFIX):] in EXTRAS}
    return model, extras


def to_npz_entries(model, extras):
    out = {}
    for tname, t in model.state_dict().items():
        name, transposed = tapegrad_name(tname)
        a = t.detach().to(torch.float32).cpu().numpy()
        out[name] = np.ascontiguousarray(a.T if transposed else a)
    out.update(config_to_npz(model.config))
    out.update(extras)
    return out


def read_npz(path):
    # np.load takes any other file for a pickle and says pickles are not allowed
    if not zipfile.is_zipfile(path):
        raise UsageError(f"{path}: not an .npz file (a tapegrad checkpoint is a zip archive "
                         "of .npy arrays)")
    try:
        with np.load(path) as f:
            return {k: f[k] for k in f.files}
    except (ValueError, OSError) as e:
        raise UsageError(f"{path}: not a readable .npz file ({e})")


def load_pt(path, allow_nonfinite):
    try:
        saved = torch.load(path, map_location="cpu")
    except Exception as e:  # torch raises pickle's, zipfile's and its own errors here
        raise UsageError(f"{path}: not a file torch.save wrote ({e})")
    if not isinstance(saved, dict) or not {"config", "state_dict"} <= set(saved):
        raise UsageError(f"{path}: not a file this tool wrote (a dict with config and state_dict)")
    unknown = set(saved["config"]) - set(NAMES)
    if unknown:
        raise UsageError(f"{path}: unknown config fields {', '.join(sorted(unknown))}")
    model = Transformer(Config(**saved["config"]))
    model.load_state_dict(saved["state_dict"])
    for tname, t in saved["state_dict"].items():
        require_finite(path, tapegrad_name(tname)[0], t.detach().to(torch.float32).cpu().numpy(),
                       allow_nonfinite)
    return model, {k: np.asarray(v) for k, v in saved.get("extras", {}).items()}


def save_pt(path, model, extras):
    torch.save({"config": dataclasses.asdict(model.config), "state_dict": model.state_dict(),
                "extras": extras}, path)


# ---- the check: the same batch through tapegrad and through torch --------------------------

def check(model, npz_path, logits_bin, batch, seed, allow_nonfinite, label=None):
    c = model.config
    rng = np.random.default_rng(seed)
    seq = rng.integers(0, c.vocab, size=(batch, c.context + 1), dtype=np.int64)
    tokens, targets = seq[:, :-1], seq[:, 1:]
    with tempfile.TemporaryDirectory() as d:
        np.savez(os.path.join(d, "batch.npz"), tokens=tokens, targets=targets)
        run = subprocess.run([logits_bin, "--model", npz_path, "--tokens", os.path.join(d, "batch.npz"),
                              "--out", os.path.join(d, "logits.npz")] +
                             (["--allow-nonfinite"] if allow_nonfinite else []),
                             capture_output=True, text=True)
        if run.returncode != 0:
            raise UsageError(f"{logits_bin} failed: {run.stderr.strip()}")
        ours = np.load(os.path.join(d, "logits.npz"))
        ref_logits, ref_loss = ours["logits"], float(ours["loss"])
    model = model.float().eval()
    with torch.no_grad():
        t = torch.from_numpy(tokens)
        logits = model(t).numpy()
        loss = float(model.loss(t, torch.from_numpy(targets)))
    scale = float(np.abs(ref_logits).max())
    logit_diff = float(np.abs(logits - ref_logits).max())
    loss_diff = abs(loss - ref_loss)
    ok = logit_diff <= LOGITS_TOLERANCE * scale and loss_diff <= LOSS_TOLERANCE * abs(ref_loss)
    print(f"check {label or npz_path}: batch ({batch}, {c.context}) seed {seed}: logits max |torch - tapegrad| = "
          f"{logit_diff:.3g} = {logit_diff / scale:.3g} of max |logit| {scale:.4g} (limit "
          f"{LOGITS_TOLERANCE:g}); loss torch {loss:.9f} tapegrad {ref_loss:.9f} |diff| "
          f"{loss_diff:.3g} = {loss_diff / abs(ref_loss):.3g} of the loss (limit {LOSS_TOLERANCE:g}): "
          f"{'PASS' if ok else 'FAIL'}")
    return ok


# ---- the command line --------------------------------------------------------------------

class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def parse(argv):
    p = Parser(prog="to_torch.py", description=__doc__.split("\n\n")[0])
    p.add_argument("inputs", nargs="+", metavar="input",
                   help="tapegrad checkpoints (.npz; several only with --check) or one file "
                        "this tool wrote (.pt)")
    p.add_argument("--out", help="write the torch module's config and state_dict here (.pt)")
    p.add_argument("--to-npz", help="write a tapegrad checkpoint here (.npz)")
    p.add_argument("--check", action="store_true", help="compare logits and loss with tapegrad")
    p.add_argument("--logits-bin", default=os.path.join(REPO, "build", "tools", "logits"))
    p.add_argument("--batch", type=int, default=4, help="--check: sequences in the batch")
    p.add_argument("--seed", type=int, default=0, help="--check: seed of the random tokens")
    p.add_argument("--allow-nonfinite", action="store_true",
                   help="convert weights holding NaN or Inf (an error otherwise)")
    a = p.parse_args(argv)
    for path in a.inputs:
        if not os.path.isfile(path):
            raise UsageError(f"{path}: no such file")
        if path.endswith(".pt") == (a.to_npz is None):
            raise UsageError(f"{path}: a .npz input converts to torch (--out), a .pt input back "
                             "to tapegrad (--to-npz)")
    if len(a.inputs) > 1 and (a.out or a.to_npz or not a.check):
        raise UsageError(f"{len(a.inputs)} inputs: several checkpoints are only for --check "
                         "(--out and --to-npz take one)")
    if a.to_npz is None and not a.out and not a.check:
        raise UsageError("nothing to do: give --out FILE.pt to convert, --check to compare the "
                         "logits with tapegrad, or both")
    if a.check and not os.access(a.logits_bin, os.X_OK):
        raise UsageError(f"--check needs tapegrad's logits program, not found at {a.logits_bin} "
                         "(build it, or pass --logits-bin)")
    if a.batch < 1:
        raise UsageError(f"--batch {a.batch} must be at least 1")
    return a


def main(argv):
    a = parse(argv)
    if a.to_npz is None:
        ok = True
        for path in a.inputs:
            entries = read_npz(path)
            model, extras = to_module(entries, path, a.allow_nonfinite)
            if a.check:
                ok = check(model, path, a.logits_bin, a.batch, a.seed, a.allow_nonfinite) and ok
            if a.out:
                save_pt(a.out, model, extras)
        return 0 if ok else 1
    model, extras = load_pt(a.inputs[0], a.allow_nonfinite)
    # written beside its destination and moved there only once the check has run, so that
    # an input tapegrad refuses leaves nothing behind
    tmp = a.to_npz + ".partial.npz"
    try:
        np.savez(tmp, **to_npz_entries(model, extras))
        ok = (check(model, tmp, a.logits_bin, a.batch, a.seed, a.allow_nonfinite, a.to_npz)
              if a.check else True)
        os.replace(tmp, a.to_npz)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (UsageError, RuntimeError, ValueError, OSError) as e:
        print(f"{PROGRAM}: {' '.join(str(e).split())}", file=sys.stderr)
        sys.exit(2)
