"""What every peer program shares with the C++ programs of bench/: the command line, the
workloads' shapes (bench/harness.hpp and bench/llama_reference.hpp), the timing loop, peak
RSS, the JSON line, and the start-up check against tapegrad's answer for the same inputs,
read from the .npz that `tapegrad_bench --workload W --dump FILE` writes.

A peer program calls parse_args() before importing its framework (thread settings are
environment variables that must be set first), then run(name, args, build, info).
build(workload, ref, args) returns a Workload: step() runs one timed step and waits for its
result; check() compares against ref and returns named errors; losses, when set, are the
training workloads' per-step losses, checked as the C++ programs check theirs.
"""
import argparse
import json
import math
import os
import re
import resource
import statistics
import sys
import time

import numpy as np

SHAPES = {"S1": (1, 16, 32, 4), "S2": (8, 128, 128, 8), "S3": (4, 512, 256, 8),
          "S4": (1, 2048, 256, 8)}  # (B, T, D, heads)
TOYGPT = dict(vocab=65, context=64, d_model=128, heads=4, layers=2, mlp_ratio=4, batch=32,
              lr=3e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.01)
# TOY-GPT's size with the llama preset: hidden = 2/3 * 4 * 128 rounded up to 32
LLAMA = dict(TOYGPT, kv_heads=2, hidden=352, rope_theta=10000.0, norm_eps=1e-5)
# llama's feed-forward as 4 experts of half its hidden size, each token to 2 of them
# (renormalised), with tapegrad's default auxiliary coefficients: the same active size
MOE = dict(LLAMA, experts=4, top_k=2, expert_hidden=176, aux_coef=0.01, z_coef=0.001)
# bench::gpt2_small: GPT-2 small as Hugging Face's GPT-2 (biases on q, k, v and o, the head
# tied to the token embedding), TOY-GPT's AdamW settings; gpt2_124M_step_B<batch>T<seq>
GPT2 = dict(TOYGPT, vocab=50257, context=1024, d_model=768, heads=12, layers=12)
GPT2_SHAPES = ((4, 64), (1, 1024), (4, 1024))  # (batch, seq)
GPT2_WEIGHTS = "gpt2_124M.weights.npz"  # bench::kGpt2WeightsFile, beside the reference
GRAD_SAMPLES = 65536  # bench::kGradSamples
FLASH = dict(B=1, H=8, dh=32)
FLASH_LENGTHS = (2048, 8192, 32768)
# bench::decode_shape: the llama preset at d_model 256, 4 layers, 8 heads over 2 KV heads,
# vocab 256, one sequence; hidden = 2/3 * 4 * 256 rounded up to 32
DECODE = dict(vocab=256, d_model=256, layers=4, heads=8, kv_heads=2, hidden=704,
              rope_theta=10000.0, norm_eps=1e-5)
DECODE_CONTEXTS = (256, 1024)


class CheckFailed(Exception):
    pass


class DoesNotFit(Exception):
    """The peer's way of running the workload needs more memory than the machine has."""


class NotWritten(Exception):
    """The peer has no program for this kind of workload."""


def builder(table, w, who):
    """table[w["kind"]], the peer's class for the workload; NotWritten when it has none (or
    for a bf16 step, which only PyTorch's CPU autocast runs)."""
    if w.get("bf16") and who != "torch":
        raise NotWritten(f"{who} has no bf16 program (PyTorch's autocast runs the _bf16 steps)")
    if w.get("ckpt") and who != "torch":
        raise NotWritten(f"{who} has no checkpointed program (PyTorch's torch.utils.checkpoint runs it)")
    if w["kind"] not in table:
        raise NotWritten(f"{who} has no {w['kind']} program (it runs {', '.join(table)})")
    return table[w["kind"]]


def workload(name):
    """'mha_fwdbwd_f32_S3' -> dict(kind, backward, dtype, B, T, D, H, KV, ...); a training
    step's name with _bf16 -> that step with bf16=True (its matrix products in bf16)."""
    if name.endswith("_bf16") and (name[:-5] in ("toygpt_step", "llama_step", "moe_step")
                                   or name[:-5] in ("gpt2_124M_step_B4T64", "gpt2_124M_step_B1T1024")):
        return dict(workload(name[:-5]), name=name, bf16=True)
    if name == "gpt2_124M_step_B4T1024_ckpt":  # bench::kGpt2CheckpointedStep
        return dict(workload(name[:-5]), name=name, ckpt=True)
    m = re.fullmatch(r"gpt2_124M_step_B(\d+)T(\d+)", name)
    if m and (int(m.group(1)), int(m.group(2))) in GPT2_SHAPES:
        return dict(GPT2, kind="gpt2", name=name, batch=int(m.group(1)), seq=int(m.group(2)))
    m = re.fullmatch(r"(mha|gqa)_(fwd|fwdbwd)_(f32|f64)_(S[1-4])", name)
    if m:
        B, T, D, H = SHAPES[m.group(4)]
        kv = H // 4 if m.group(1) == "gqa" else H
        return dict(kind="mha", name=name, backward=m.group(2) == "fwdbwd",
                    dtype="float64" if m.group(3) == "f64" else "float32",
                    B=B, T=T, D=D, H=H, KV=kv)
    if name == "toygpt_step":
        return dict(TOYGPT, kind="toygpt", name=name)
    if name == "llama_step":
        return dict(LLAMA, kind="llama", name=name)
    if name == "moe_step":
        return dict(MOE, kind="moe", name=name)
    m = re.fullmatch(r"flash_fwdbwd_f32_T(\d+)", name)
    if m and int(m.group(1)) in FLASH_LENGTHS:
        return dict(FLASH, kind="flash", name=name, T=int(m.group(1)), dtype="float32")
    m = re.fullmatch(r"decode_ctx(\d+)", name)
    if m and int(m.group(1)) in DECODE_CONTEXTS:
        return dict(DECODE, kind="decode", name=name, context=int(m.group(1)))
    return None


def require_scores_fit(w, who):
    """For a peer whose attention forms the (B, H, T, T) scores: DoesNotFit unless three of
    them (scores, weights and their gradient) fit in three quarters of the memory."""
    need = 3.0 * w["B"] * w["H"] * w["T"] ** 2 * 4
    have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if need > 0.75 * have:
        raise DoesNotFit(f"{who} forms (B, H, T, T) scores: three of them need {need / 2**30:.0f} GiB, "
                         f"the machine has {have / 2**30:.0f} GiB")


THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def set_thread_env(threads, variables=THREAD_VARIABLES):
    """Sets each thread-count variable to `threads`; before the framework is imported, which
    reads them once."""
    for var in variables:
        os.environ[var] = str(threads)


def parse_args(prog):
    p = argparse.ArgumentParser(prog=prog)
    p.add_argument("--workload")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--ref", help="tapegrad's reference .npz for the workload")
    p.add_argument("--skip-check", action="store_true")
    p.add_argument("--info", action="store_true")
    a = p.parse_args()
    if a.info:
        return a
    if not a.workload or workload(a.workload) is None:
        p.error(f"unknown or missing --workload {a.workload!r}")
    if a.threads < 1 or a.repeats < 1 or a.warmup < 0:
        p.error("--threads and --repeats must be >= 1, --warmup >= 0")
    if not a.ref:
        p.error("--ref FILE.npz is required (the inputs come from it)")
    return a


def rel_error(got, want, scale=None):
    """max |got - want| over max |want| (or over scale), in double."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        raise CheckFailed(f"shape {got.shape} is not tapegrad's {want.shape}")
    if scale is None:
        scale = float(np.max(np.abs(want)))
    return float(np.max(np.abs(got - want)) / max(scale, 1e-300))


def compare(errors, key, pairs, tol):
    """errors[key] = the worst rel_error over (label, got, want[, scale]); CheckFailed above
    tol."""
    worst, where = 0.0, ""
    for label, got, want, *scale in pairs:
        e = rel_error(got, want, *scale)
        if e > worst or not math.isfinite(e):
            worst, where = e, label
    errors[key] = worst
    if not worst <= tol:
        raise CheckFailed(f"{where} differs from tapegrad's by {worst:.3g} (tolerance {tol:g})")


MHA_GRADS = ("dx", "dWq", "dWk", "dWv", "dWo")
FLASH_GRADS = ("dq", "dk", "dv")


def check_mha(w, ref, y, grads):
    """The start-up check of an MHA/GQA workload: y, and for fwdbwd the gradients in
    MHA_GRADS' order (read only then), as numpy arrays, against tapegrad's."""
    fwd_tol, bwd_tol = (1e-10, 1e-9) if w["dtype"] == "float64" else (1e-4, 1e-3)
    errors = {}
    compare(errors, "check_fwd_rel_err", [("y", y, ref["y"])], fwd_tol)
    if w["backward"]:
        compare(errors, "check_bwd_rel_err", [(n, g, ref[n]) for n, g in zip(MHA_GRADS, grads)], bwd_tol)
    return errors


def check_decode(ref, logits):
    """The start-up check of a cached decode workload: the logits of one cached step after
    the prompt, at the check weights, against tapegrad's (which its own start-up check
    holds to 1e-4 of a naive forward in double)."""
    errors = {}
    compare(errors, "check_logits_rel_err", [("logits", logits, ref["check_logits"])], 1e-4)
    return errors


def check_flash(ref, out, grads):
    """The start-up check of a long-context attention workload: out and the gradients in
    FLASH_GRADS' order, as numpy arrays, against tapegrad's."""
    errors = {}
    compare(errors, "check_fwd_rel_err", [("out", out, ref["out"])], 1e-4)
    compare(errors, "check_bwd_rel_err", [(n, g, ref[n]) for n, g in zip(FLASH_GRADS, grads)], 1e-3)
    return errors


class TrainCheck:
    """What a training workload's start-up check runs, as tapegrad_bench's: TOY-GPT and GPT-2
    the timed weights on the whole batch; llama the check weights ("check.<name>") on the
    first two sequences, whose loss and gradients tapegrad wrote under other names; MoE as
    llama, its loss the training loss (LM + auxiliary + z). GPT-2's gradients are compared
    at tapegrad's samples of them (grad_sample)."""

    def __init__(self, w):
        timed = w["kind"] in ("toygpt", "gpt2")
        self.weights = None if timed else "check."  # None: the timed weights
        self.rows = w["batch"] if timed else 2
        self.loss_key = "loss" if timed else "check_loss"
        self.sampled = w["kind"] == "gpt2"
        self.grad_prefix = "grad_sample." if self.sampled else "grad." if timed else "check_grad."

    def compare(self, ref, loss, grads):
        """loss a float, grads (name, numpy array) pairs."""
        errors = {}
        compare(errors, "check_loss_rel_err", [("loss", loss, float(ref[self.loss_key]))], 1e-4)
        pick = grad_sample if self.sampled else (lambda g: g)
        pairs = [(k, pick(g), ref[self.grad_prefix + k]) for k, g in grads]
        if self.sampled:
            # A key bias's gradient is zero but for rounding (it adds q.bk to every score of
            # a query row, which the softmax ignores): measured against its layer's Wk's.
            pairs = [p + ((float(np.max(np.abs(ref[self.grad_prefix + p[0][:-2] + "Wk"]))),)
                          if p[0].endswith(".attn.bk") else ()) for p in pairs]
        compare(errors, "check_grad_rel_err", pairs, 2e-3)
        return errors


def grad_sample(g):
    """bench::grad_sample_stride's sample of a gradient: entries 0, s, 2s, ... of the
    flattened array, s = max(1, size // GRAD_SAMPLES) made odd."""
    flat = np.ascontiguousarray(g).reshape(-1)
    return flat[::max(1, flat.size // GRAD_SAMPLES) | 1]


def gpt2_params(w, ref):
    """{name: array} of GPT-2's initial weights (GPT2_WEIGHTS beside the reference),
    checked against the reference's param_sum (the file is written once, for every shape)."""
    P = params(np.load(os.path.join(os.path.dirname(os.path.abspath(w["ref_path"])), GPT2_WEIGHTS)), "param.")
    total = sum(float(np.sum(a, dtype=np.float64)) for a in P.values())
    if abs(total - float(ref["param_sum"])) > 1e-6 * max(1.0, abs(total)):
        raise CheckFailed(f"{GPT2_WEIGHTS} sums to {total}, the reference's weights to {float(ref['param_sum'])}")
    return P


def gpt2_parameters(w):
    """bench::gpt2_parameters: 124,439,808 at GPT-2 small."""
    D, Hd = w["d_model"], w["mlp_ratio"] * w["d_model"]
    return (w["vocab"] + w["context"]) * D + w["layers"] * (4 * D + 4 * D * D + 4 * D + 2 * D * Hd + Hd + D) + 2 * D


def params(ref, prefix):
    """{name: array} of the reference's entries "<prefix><name>", in the file's order."""
    return {k[len(prefix):]: np.asarray(ref[k]) for k in ref.files if k.startswith(prefix)}


def check_losses(w, losses):
    """As bench::check_toygpt_losses: the first loss near ln(vocab), then falling (the
    language-model loss, without an MoE model's auxiliary losses)."""
    first, last, uniform = losses[0], losses[-1], math.log(w["vocab"])
    if abs(first - uniform) >= 0.3:
        raise CheckFailed(f"first loss {first} is not near ln(vocab) = {uniform:.4f}")
    if len(losses) >= 5 and not last < first - 0.05:
        raise CheckFailed(f"loss did not fall on a fixed batch: {first} -> {last}")
    return {"first_loss": first, "last_loss": last}


def flops(w):
    """The C++ programs' GFLOP counts (harness/workloads.hpp), so the columns compare."""
    if w["kind"] == "mha":
        B, T, D, KVW = w["B"], w["T"], w["D"], w["KV"] * (w["D"] // w["H"])
        fwd = 2 * B * T * D * (2 * D + 2 * KVW) + 4 * B * T * T * D
        return 3 * fwd if w["backward"] else fwd
    if w["kind"] == "flash":
        return 6.0 * 2.0 * w["B"] * w["H"] * w["T"] ** 2 * w["dh"] / 2.0
    if w["kind"] == "decode":  # bench::decode_flops: one token's products
        D, Q = w["d_model"], w["d_model"]
        KV = w["kv_heads"] * (D // w["heads"])
        per_layer = D * (2 * Q + 2 * KV) + 3 * D * w["hidden"] + 2.0 * w["context"] * Q
        return 2.0 * (w["layers"] * per_layer + D * w["vocab"])
    if w["kind"] == "gpt2":  # bench::gpt2_flops: 6 x parameters x tokens + attention
        tokens = w["batch"] * w["seq"]
        return tokens * (6.0 * gpt2_parameters(w) + 12.0 * w["layers"] * w["seq"] * w["d_model"])
    tokens, D, L, C, V = w["batch"] * w["context"], w["d_model"], w["layers"], w["context"], w["vocab"]
    if w["kind"] == "toygpt":
        per = 2.0 * (L * (4 + 2 * w["mlp_ratio"]) * D * D + D * V) + L * 4.0 * C * D
        return 3.0 * tokens * per
    dh = D // w["heads"]
    Q, KV = w["heads"] * dh, w["kv_heads"] * dh
    per_layer = D * (2 * Q + 2 * KV) + 3 * D * w["hidden"] + 2.0 * C * Q
    return 3.0 * tokens * 2.0 * (L * per_layer + D * V)


def _rusage():
    return resource.getrusage(resource.RUSAGE_SELF)


def run(framework, args, build, info):
    """Builds the workload, checks it, times it, prints one JSON line (exit 3 on a failed
    check, as the C++ programs)."""
    if args.info:
        print(json.dumps(dict(framework=framework, **info())))
        return 0
    start_rss = _rusage().ru_maxrss
    w = dict(workload(args.workload), ref_path=args.ref)
    ref = np.load(args.ref)
    try:
        t0 = time.perf_counter()
        wl = build(w, ref, args)
        build_ms = (time.perf_counter() - t0) * 1e3
        # The first call traces and compiles (jit, torch.compile, mx.compile, TinyJit): its
        # wall time is compile_ms, never one of the samples. It is the check's step (the
        # same function on the same inputs), or, when the check is skipped, the first
        # warm-up step (none with --warmup 0: an eager peer at a minute per step).
        t0 = time.perf_counter()
        errors = {}
        if not args.skip_check:
            errors = wl.check()
        elif args.warmup > 0:
            wl.step()
            args.warmup -= 1
        compile_ms = (time.perf_counter() - t0) * 1e3
        for _ in range(args.warmup):
            wl.step()
        samples, cpu, faults = [], [], 0
        for _ in range(args.repeats):
            f0, c0, t0 = _rusage().ru_minflt, time.process_time(), time.perf_counter()
            wl.step()
            t1, c1 = time.perf_counter(), time.process_time()
            faults += _rusage().ru_minflt - f0
            samples.append((t1 - t0) * 1e3)
            cpu.append((c1 - c0) * 1e3)
        if getattr(wl, "losses", None) is not None:
            errors.update(check_losses(w, wl.losses))
    except CheckFailed as e:
        print(f"CORRECTNESS CHECK FAILED: {framework} {args.workload}: {e}", file=sys.stderr)
        return 3
    except DoesNotFit as e:
        print(f"{framework}: {args.workload} does not fit: {e}", file=sys.stderr)
        return 5
    except NotWritten as e:
        print(f"{framework}: {args.workload} not written: {e}", file=sys.stderr)
        return 4
    med = statistics.median(samples)
    out = dict(framework=framework, workload=args.workload, threads=args.threads,
               repeats=args.repeats, warmup=args.warmup, median_ms=round(med, 6),
               min_ms=round(min(samples), 6), peak_rss_kb=_rusage().ru_maxrss,
               start_rss_kb=start_rss, faults_per_step=faults / len(samples),
               samples_ms=[round(s, 6) for s in samples], cpu_samples_ms=[round(c, 6) for c in cpu],
               compile_ms=round(compile_ms, 3), build_ms=round(build_ms, 3))
    out.update(errors)
    out["gflops"] = flops(w) / (med * 1e6)
    if w["kind"] == "gpt2":
        out["tokens"] = w["batch"] * w["seq"]
        out["tokens_per_s"] = out["tokens"] * 1e3 / med
        out["step_gflop"] = flops(w) / 1e9
    print(json.dumps(out), flush=True)
    return 0
