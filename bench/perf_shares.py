#!/usr/bin/env python3
"""Where a training step's time goes, from a call-graph profile of tapegrad_bench:

    perf record -e cpu-clock -F 199 --call-graph dwarf,16384 -o step.data -- \\
        build-bench/bench/tapegrad_bench --workload gpt2_124M_step_B4T64 --threads 1 \\
        --repeats 3 --warmup 1
    perf script -i step.data | python3 bench/perf_shares.py

(docs/PERFORMANCE.md's GPT-2 profile: -F 199 at B4T64, 3 repeats; -F 99 at B1T1024, 2.)
A sample whose stack ends in OpenBLAS's assembly, which has no unwind tables, shows no
callers: its product counts as "other matrix products" whoever called it.

Each sample goes to the first category whose pattern matches a frame of its stack (leaf
first for the kernels, any frame for the callers): the model's construction and the
reference sgemm are left out, then the optimiser (AdamW's step and zero_grad), the head
(linear_cross_entropy: its products, softmax and loss), attention (the attention kernels
and their products), the other matrix products (OpenBLAS and tapegrad's gemm kernels),
and the rest (norms, GELU, embeddings, elementwise ops, the tape, page faults).
Prints each category's share of the step's samples."""
import re
import sys

SETUP = re.compile(r"Transformer<.*>::Transformer|init::normal|sgemm_peak_gflops|_dl_|__libc_start_call_main$")
CALLERS = [  # (category, a frame matching this anywhere in the stack)
    ("optimiser", re.compile(r"AdamW<.*>::(step|zero_grad)|Tensor<.*>::zero_grad")),
    ("head (linear_cross_entropy)", re.compile(r"linear_cross_entropy")),
    ("attention", re.compile(r"attention|flash|causal_softmax|decode_step")),
]
PRODUCTS = re.compile(r"sgemm|gemm|libopenblas|bf16|amx|tdpbf16", re.I)


def samples(lines):
    stack = []
    for line in lines:
        if not line.strip():
            if stack:
                yield stack
            stack = []
        elif line.startswith((" ", "\t")):
            parts = line.strip().split(None, 1)
            stack.append(parts[1] if len(parts) > 1 else parts[0])
    if stack:
        yield stack


def category(stack):
    if any(SETUP.search(f) for f in stack) and not any("time_steps" in f or "time_parts" in f for f in stack):
        return None
    for name, pattern in CALLERS:
        if any(pattern.search(f) for f in stack):
            return name
    if PRODUCTS.search(stack[0]) or any(re.search(r"kernels::gemm|Matmul|matmul", f) for f in stack[:6]):
        return "other matrix products"
    return "the rest"


def main():
    counts = {}
    for stack in samples(sys.stdin):
        c = category(stack)
        if c is not None:
            counts[c] = counts.get(c, 0) + 1
    total = sum(counts.values())
    if not total:
        sys.exit("perf_shares: no samples in the step")
    for name, n in sorted(counts.items(), key=lambda kv: -kv[1]):
        print(f"{name:32s} {100.0 * n / total:5.1f} %  ({n} samples)")
    print(f"{'total':32s} 100.0 %  ({total} samples)")


if __name__ == "__main__":
    main()
