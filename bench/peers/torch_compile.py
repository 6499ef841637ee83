#!/usr/bin/env python3
"""PyTorch 2.x with torch.compile (inductor, its default CPU backend: generated C++ with
OpenMP) around the model function; the optimizer step stays eager, as a user writes it.
The first step compiles; its time is compile_ms. Threads as torch_eager.py."""
import sys

import common

args = common.parse_args("torch_compile")
common.set_thread_env(args.threads)
import torch  # noqa: E402

import torch_models  # noqa: E402

torch.set_num_threads(args.threads)
torch.set_num_interop_threads(1)


def info():
    import torch._inductor.config as cfg
    return dict(torch_models.info(), backend="inductor", cpp_compiler=str(cfg.cpp.cxx))


sys.exit(common.run("torch_compile", args,
                    lambda w, ref, a: torch_models.build(w, ref, torch.compile), info))
