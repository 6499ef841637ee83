#!/usr/bin/env python3
"""PyTorch 2.x eager: the workloads of torch_models.py as written, one per process.
Threads: torch.set_num_threads(N) and OMP_NUM_THREADS=MKL_NUM_THREADS=N (set before import),
one inter-op thread."""
import sys

import common

args = common.parse_args("torch_eager")
common.set_thread_env(args.threads)
import torch  # noqa: E402

import torch_models  # noqa: E402

torch.set_num_threads(args.threads)
torch.set_num_interop_threads(1)
sys.exit(common.run("torch_eager", args, lambda w, ref, a: torch_models.build(w, ref, lambda f: f),
                    torch_models.info))
