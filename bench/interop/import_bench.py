#!/usr/bin/env python3
"""Importing a Hugging Face folder: tapegrad against transformers, side by side.

A GPT-2-small-shaped model (124M parameters, about 500 MB of float32) with random weights is
written once with transformers' save_pretrained (model.safetensors); then, alternating, each
loader runs in a fresh process that reads the folder into a float32 model and reports its
wall time and peak RSS (getrusage), beside the RSS the process had before the load.

    python3 bench/interop/import_bench.py [--repeats 3] [--folder DIR] [--json out.json]

Needs transformers (4.49.0 here) and torch in the interpreter, and tapegrad's module on
PYTHONPATH (build/python). The model's size is the safetensors file's.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

CHILD = r"""
import resource, sys, time
kind, folder = sys.argv[1], sys.argv[2]
if kind == "tapegrad":
    import tapegrad
    import tapegrad.nn
else:
    import torch
    from transformers import AutoModelForCausalLM
    torch.set_num_threads(1)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
if kind == "tapegrad":
    model = tapegrad.nn.Transformer.from_pretrained(folder, dtype="float32")
else:
    model = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32)
seconds = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(f"{seconds} {before * 1024} {peak * 1024}")
"""


def make_folder(folder):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config())  # 12 layers, 12 heads, width 768, vocab 50,257
    model.save_pretrained(folder, safe_serialization=True)


def run_child(kind, folder):
    out = subprocess.run([sys.executable, "-c", CHILD, kind, folder], check=True,
                         capture_output=True, text=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    seconds, before, peak = out.stdout.split()
    return float(seconds), int(before), int(peak)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--folder", help="use (or create) this folder instead of a temporary one")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    folder = args.folder or tempfile.mkdtemp(prefix="import_bench_")
    if not os.path.exists(os.path.join(folder, "model.safetensors")):
        make_folder(folder)
    size = os.path.getsize(os.path.join(folder, "model.safetensors"))
    runs = {"tapegrad": [], "transformers": []}
    for _ in range(args.repeats):
        for kind in runs:  # alternating, so both see the same page cache and machine load
            runs[kind].append(run_child(kind, folder))
    result = {"model_bytes": size, "repeats": args.repeats}
    for kind, samples in runs.items():
        seconds = sorted(s for s, _, _ in samples)
        result[kind] = {
            "median_s": seconds[len(seconds) // 2], "min_s": seconds[0],
            "peak_rss_bytes": max(p for _, _, p in samples),
            "rss_before_load_bytes": max(b for _, b, _ in samples),
            "peak_rss_over_model": max(p for _, _, p in samples) / size,
            "load_rss_over_model": max(p - b for _, b, p in samples) / size,
        }
    result["time_ratio_tapegrad_over_transformers"] = (
        result["tapegrad"]["median_s"] / result["transformers"]["median_s"])
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)


if __name__ == "__main__":
    main()
