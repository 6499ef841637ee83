#!/usr/bin/env python3
"""tapegrad against the peers a user picks today (PyTorch 2.x eager and torch.compile, JAX
with jax.jit, MLX on its CPU backend, tinygrad), side by side in the same run.

1. Installs the peers with pip from PyPI into a virtual environment of its own,
   bench/peers/.venv (gitignored, as its download cache bench/peers/.pip-cache): never into
   the interpreter the tests use. A peer whose install fails is reported with pip's error.
2. Builds tapegrad_bench and torch_reference (libtorch 1.13) in Release (build-bench/).
3. For each workload, writes tapegrad's reference (inputs and answer) to
   bench/peers/.refs/W.npz; every peer loads its inputs from it and checks its own answer
   against it at start-up (a peer that disagrees is reported, not timed).
4. Runs every framework on every workload at each thread count, one process per
   (framework, workload, threads, round), alternating: round 1 tapegrad first, round 2
   reversed, ... so the machine's slow spells hit all alike. Ratios are tapegrad / peer of
   the pooled medians (and of the minima) in the same run.

Writes bench/peers/results.json (or --results FILE); --markdown prints the tables for
docs/PERFORMANCE.md.
    python3 bench/peers/run_bench.py [--threads 1,2] [--filter REGEX] [--peers a,b]
"""
import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
BUILD = os.path.join(ROOT, "build-bench")
VENV = os.path.join(HERE, ".venv")
CACHE = os.path.join(HERE, ".pip-cache")
REFS = os.path.join(HERE, ".refs")
RESULTS = os.path.join(HERE, "results.json")

# peer -> (its program, the PyPI requirements it needs)
PEERS = {
    "torch_eager": ("torch_eager.py", ["torch"]),
    "torch_compile": ("torch_compile.py", ["torch"]),
    "jax_jit": ("jax_jit.py", ["jax[cpu]"]),
    "mlx_cpu": ("mlx_cpu.py", ["mlx[cpu]"]),
    "tinygrad": ("tinygrad_peer.py", ["tinygrad"]),
}
NATIVE = ("tapegrad", "libtorch")
WORKLOADS = ([f"mha_{p}_{d}_S{i}" for p in ("fwd", "fwdbwd") for d in ("f32", "f64") for i in range(1, 5)]
             + ["gqa_fwdbwd_f32_S3", "toygpt_step", "llama_step", "moe_step"]
             + ["toygpt_step_bf16", "llama_step_bf16", "moe_step_bf16"]
             + [f"flash_fwdbwd_f32_T{t}" for t in (2048, 8192, 32768)]
             + [f"decode_ctx{c}" for c in (256, 1024)] + ["gemm_peak_f32"]
             + [f"gpt2_124M_step_{s}{b}" for s in ("B4T64", "B1T1024") for b in ("", "_bf16")]
             + ["gpt2_124M_step_B4T1024", "gpt2_124M_step_B4T1024_ckpt"])
# A step of minutes: checked at T 2048 and 8192 (the same kernels), timed once here.
UNCHECKED = {"flash_fwdbwd_f32_T32768"}
NATIVE_ONLY = {"gemm_peak_f32"}  # the ceiling the GFLOP/s are read against: no peer runs it
# The workloads libtorch 1.13's C++ program (torch_reference) has no program for.
NOT_IN_LIBTORCH = {"moe_step", "toygpt_step_bf16", "llama_step_bf16", "moe_step_bf16"} | {
    w for w in WORKLOADS if w.startswith("gpt2_124M_step_")}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def python():
    return os.path.join(VENV, "bin", "python")


def install(peers):
    """pip-installs each peer's requirements into the venv; {peer: error} for failures."""
    if not os.path.exists(python()):
        subprocess.run([sys.executable, "-m", "venv", VENV], check=True)
    failed = {}
    base = [python(), "-m", "pip", "install", "--cache-dir", CACHE, "--quiet"]
    r = subprocess.run(base + ["numpy"], capture_output=True, text=True)
    if r.returncode != 0:
        return {p: "pip install numpy: " + r.stderr.strip()[-400:] for p in peers}
    for p in peers:
        reqs = PEERS[p][1]
        r = subprocess.run(base + reqs, capture_output=True, text=True)
        if r.returncode != 0:
            failed[p] = f"pip install {' '.join(reqs)}: " + r.stderr.strip()[-400:]
    return failed


def build():
    subprocess.run(["cmake", "-S", ROOT, "-B", BUILD, "-DCMAKE_BUILD_TYPE=Release",
                    "-DTAPEGRAD_BUILD_BENCH=ON", "-DTAPEGRAD_BUILD_TESTS=OFF",
                    "-DTAPEGRAD_BUILD_EXAMPLES=OFF"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", BUILD, "-j2", "--target", "tapegrad_bench"],
                   check=True, stdout=subprocess.DEVNULL)
    # torch_reference exists only where CMake found libtorch; without it the row says so
    subprocess.run(["cmake", "--build", BUILD, "-j2", "--target", "torch_reference"],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def native_missing():
    """{native framework: why} for each program the build did not make."""
    return {fw: f"{os.path.basename(cmd[0])} was not built (libtorch-dev missing?)"
            for fw in NATIVE if not os.path.exists((cmd := command(fw, "", 1, 0, 1, False))[0])}


def command(fw, workload, threads, warmup, repeats, check):
    if fw in NATIVE:
        name = "tapegrad_bench" if fw == "tapegrad" else "torch_reference"
        cmd = [os.path.join(BUILD, "bench", name)]
    else:
        cmd = [python(), os.path.join(HERE, PEERS[fw][0]), "--ref", ref_path(workload)]
    cmd += ["--workload", workload, "--threads", str(threads), "--repeats", str(repeats),
            "--warmup", str(warmup)]
    return cmd + ([] if check else ["--skip-check"])


def base_step(workload):
    """A _bf16 or _ckpt step's float32 step: the same model and batch."""
    return workload.removesuffix("_bf16").removesuffix("_ckpt")


def ref_path(workload):
    """A _bf16 or _ckpt step reads its float32 step's reference."""
    return os.path.join(REFS, base_step(workload) + ".npz")


def run_one(fw, workload, threads, warmup, repeats, check, timeout):
    t0 = time.time()
    try:
        p = subprocess.run(command(fw, workload, threads, warmup, repeats, check),
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    wall = time.time() - t0
    if p.returncode != 0:
        lines = [l for l in p.stderr.strip().splitlines() if l.strip()]
        return {"error": f"exit {p.returncode}: " + (lines[-1] if lines else "")[-400:], "wall_s": wall}
    try:
        rec = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": "no JSON line: " + p.stdout[-300:], "wall_s": wall}
    rec["wall_s"] = wall
    return rec


def plan(w):
    """(warmup, repeats, rounds): the long rows get fewer samples."""
    if w == "flash_fwdbwd_f32_T32768":
        return 0, 1, 1
    if w.startswith("gpt2_124M_step_B4T1024"):  # 25 GFLOP a step at 1 thread: for its peak RSS
        return 0, 2, 1
    if w.startswith("gpt2_124M_step_"):  # seconds a step; 5 losses, enough to see them fall
        return 1, 4, 1
    if w == "flash_fwdbwd_f32_T8192":
        return 0, 2, 1
    if w.endswith("_S4") or w == "flash_fwdbwd_f32_T2048":
        return 1, 3, 2
    if w.endswith("_S3"):
        return 1, 4, 2
    if w.endswith("_S2") or w.removesuffix("_bf16") in ("toygpt_step", "llama_step", "moe_step"):
        return 2, 10, 2
    return 5, 100, 2


def merge(records):
    errors = [r["error"] for r in records if "error" in r]
    if errors:
        return {"error": errors[0]}
    samples = [s for r in records for s in r["samples_ms"]]
    cpu = [s for r in records for s in r.get("cpu_samples_ms", [])]
    out = {"median_ms": statistics.median(samples), "min_ms": min(samples),
           "cpu_median_ms": statistics.median(cpu) if cpu else None, "samples": len(samples),
           "processes": len(records), "peak_rss_kb": max(r["peak_rss_kb"] for r in records)}
    for k in ("compile_ms", "gflops", "first_loss", "last_loss", "tokens_per_s", "step_gflop",
              "sgemm_gflops", "fraction_of_sgemm"):
        vals = [r[k] for r in records if r.get(k) is not None]
        if vals:
            out[k] = statistics.median(vals)
    for k in {k for r in records for k in r if k.startswith("check")}:
        out[k] = max(r[k] for r in records if k in r)
    return out


def info(fw):
    if fw in NATIVE:
        cmd = [os.path.join(BUILD, "bench", "tapegrad_bench" if fw == "tapegrad" else "torch_reference"), "--info"]
    else:
        cmd = [python(), os.path.join(HERE, PEERS[fw][0]), "--info"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": p.stderr.strip()[-400:]}


def measure(a):
    peers = [p for p in a.peers.split(",") if p]
    unknown = [p for p in peers if p not in PEERS]
    if unknown:
        sys.exit(f"run_bench: unknown peer(s) {unknown}; known: {list(PEERS)}")
    failed = {} if a.no_install else install(peers)
    for p, e in failed.items():
        log(f"{p}: not installed: {e}")
    if not a.no_build:
        build()
    failed.update(native_missing())
    if "tapegrad" in failed:
        sys.exit("run_bench: " + failed["tapegrad"])
    only = dict(o.split(":", 1) for o in a.only)
    all_fws = ["tapegrad", "libtorch"] + peers
    names = [w for w in WORKLOADS if not a.filter or re.search(a.filter, w)]
    os.makedirs(REFS, exist_ok=True)
    out = {"date": datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC"),
           "commit": subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                                    capture_output=True, text=True).stdout.strip(),
           "info": {fw: info(fw) for fw in all_fws if fw not in failed},
           "not_installed": failed, "rows": []}
    if os.path.exists(a.results) and a.append:
        with open(a.results) as f:
            old = json.load(f)
        out["rows"] = old.get("rows", [])
    for w in names:
        if w not in NATIVE_ONLY and not os.path.exists(ref_path(w)):
            # a _bf16 or _ckpt step's reference is its float32 step's: dumped under that name
            subprocess.run([os.path.join(BUILD, "bench", "tapegrad_bench"), "--workload",
                            base_step(w), "--dump", ref_path(w)], check=True)
        warmup, repeats, rounds = plan(w)
        rounds = a.rounds or rounds
        for thr in [int(t) for t in a.threads.split(",")]:
            fws = all_fws if w not in NATIVE_ONLY else list(NATIVE)
            per = {fw: [] for fw in fws}
            for rnd in range(rounds):
                order = fws if rnd % 2 == 0 else fws[::-1]
                for fw in order:
                    if fw in failed:
                        per[fw].append({"error": "not installed: " + failed[fw]})
                        continue
                    if per[fw] and "error" in per[fw][0]:
                        continue  # broken or too big: reported once, not retried
                    if fw == "libtorch" and w in NOT_IN_LIBTORCH:
                        per[fw].append({"error": "not written: torch_reference has no program for " + w})
                        continue
                    if fw in only and not re.search(only[fw], w):
                        per[fw].append({"error": "not run: out of this run's time budget"})
                        continue
                    rec = run_one(fw, w, thr, warmup, repeats, rnd == 0 and w not in UNCHECKED, a.timeout)
                    per[fw].append(rec)
                    log(f"{w} t{thr} r{rnd} {fw}: " + (rec["error"] if "error" in rec else
                                                        f"{rec['median_ms']:.3f} ms"))
            row = {"workload": w, "threads": thr, "warmup": warmup, "repeats": repeats, "rounds": rounds,
                   "loadavg_1min": round(os.getloadavg()[0], 2)}
            for fw in fws:
                row[fw] = merge(per[fw])
            tg = row["tapegrad"]
            for fw in fws[1:]:
                o = row[fw]
                if "error" not in tg and "error" not in o:
                    o["ratio"] = tg["median_ms"] / o["median_ms"]
                    o["ratio_min"] = tg["min_ms"] / o["min_ms"]
                    o["rss_ratio"] = tg["peak_rss_kb"] / o["peak_rss_kb"]
                    if tg["cpu_median_ms"] and o["cpu_median_ms"]:
                        o["ratio_cpu"] = tg["cpu_median_ms"] / o["cpu_median_ms"]
            out["rows"] = [r for r in out["rows"] if (r["workload"], r["threads"]) != (w, thr)] + [row]
            with open(a.results, "w") as f:
                json.dump(out, f, indent=1)
    return out


def fmt_ratio(o):
    if "error" in o:
        e = o["error"]
        if "does not fit" in e:
            return "does not fit"
        if "CORRECTNESS" in e:
            return "check failed"
        if "not installed" in e:
            return "not installed"
        if "not run" in e:
            return "not run"
        if "not written" in e:
            return "not written"
        return "error"
    cpu = f" [{o['ratio_cpu']:.2f}]" if "ratio_cpu" in o else ""
    return f"{o['ratio']:.2f} ({o['ratio_min']:.2f}){cpu}"


def gpt2_table(rows):
    """One line per (GPT-2 step, threads, framework): ms a step, tokens/s, GFLOP/s (6 x
    parameters x tokens + attention), that over the sgemm peak tapegrad_bench measured in
    its process at the same threads, peak RSS, and tapegrad's time and RSS over the peer's."""
    lines = ["GPT-2 small (124M), one AdamW training step: medians; GFLOP/s of 6 x parameters x tokens "
             "plus attention; the peak is float32 sgemm (1024^3) measured in tapegrad's process at the "
             "same threads; tapegrad / peer below 1.00: tapegrad faster or smaller.", "",
             "| workload | threads | framework | ms / step | tokens/s | GFLOP/s | of sgemm peak | peak RSS MiB "
             "| tapegrad / it, time | tapegrad / it, RSS |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in sorted(rows, key=lambda r: (r["workload"].removesuffix("_bf16"), r["workload"], r["threads"])):
        peak = r["tapegrad"].get("sgemm_gflops")
        for fw in ["tapegrad"] + [f for f in PEERS if f in r]:
            o = r[fw]
            if "error" in o:
                lines.append(f"| {r['workload']} | {r['threads']} | {fw} | {fmt_ratio(o)} | | | | | | |")
                continue
            frac = f"{o['gflops'] / peak:.2f}" if peak and "gflops" in o else "-"
            tps = f"{o['tokens_per_s']:.0f}" if "tokens_per_s" in o else "-"
            ratio = f"{o['ratio']:.2f}" if "ratio" in o else "-"
            rss = f"{o['rss_ratio']:.2f}" if "rss_ratio" in o else "-"
            lines.append(f"| {r['workload']} | {r['threads']} | {fw} | {o['median_ms']:.0f} | {tps} | "
                         f"{o.get('gflops', 0):.1f} | {frac} | {o['peak_rss_kb'] / 1024:.0f} | {ratio} | {rss} |")
    lines.append("")
    return lines


def markdown(res):
    fws = [fw for fw in ["libtorch"] + list(PEERS) if any(fw in r for r in res["rows"])]
    lines = []
    for thr in sorted({r["threads"] for r in res["rows"]}):
        lines += [f"**{thr} thread{'s' if thr > 1 else ''}**: tapegrad / peer, wall-time median (min) "
                  "[process CPU-time median]; below 1.00 tapegrad is faster.", "",
                  "| workload | tapegrad ms | " + " | ".join(fws) + " |",
                  "|---|---:|" + "---:|" * len(fws)]
        for r in res["rows"]:
            if r["threads"] != thr:
                continue
            tg = r["tapegrad"]
            t = f"{tg['median_ms']:.3f}" if "error" not in tg else "error"
            lines.append(f"| {r['workload']} | {t} | " + " | ".join(fmt_ratio(r[fw]) if fw in r else "-"
                                                                     for fw in fws) + " |")
        lines.append("")
    flash = [r for r in res["rows"] if r["workload"].startswith("flash_")]
    if flash:
        fl = [fw for fw in ["tapegrad"] + fws if any(fw in r for r in flash)]
        lines += ["Long-context attention fwd+bwd: median ms and peak RSS of the process.", "",
                  "| workload | threads | " + " | ".join(fl) + " |", "|---|---:|" + "---|" * len(fl)]
        for r in flash:
            cells = []
            for fw in fl:
                o = r.get(fw)
                cells.append("-" if o is None else fmt_ratio(o) if "error" in o else
                             f"{o['median_ms'] / 1e3:.2f} s, {o['peak_rss_kb'] / 1024:.0f} MiB")
            lines.append(f"| {r['workload']} | {r['threads']} | " + " | ".join(cells) + " |")
        lines.append("")
    gpt2 = [r for r in res["rows"] if r["workload"].startswith("gpt2_124M_step_")]
    if gpt2:
        lines += gpt2_table(gpt2)
    compiled = [r for r in res["rows"] if "compile_ms" in r.get("torch_compile", {})]
    if compiled:
        lines += ["Compile time (the first call's wall time, never in the samples), torch.compile: " +
                  ", ".join(f"{r['workload']} t{r['threads']} {r['torch_compile']['compile_ms'] / 1e3:.0f} s"
                            for r in compiled), ""]
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", default="1,2")
    p.add_argument("--filter")
    p.add_argument("--peers", default=",".join(PEERS))
    p.add_argument("--rounds", type=int, help="processes per framework (default: by workload)")
    p.add_argument("--timeout", type=int, default=1800)
    p.add_argument("--only", action="append", default=[], metavar="PEER:REGEX",
                   help="run PEER only on the workloads matching REGEX (reported as not run elsewhere)")
    p.add_argument("--append", action="store_true", help="keep the other rows of results.json")
    p.add_argument("--no-install", action="store_true")
    p.add_argument("--no-build", action="store_true")
    p.add_argument("--results", default=RESULTS, help="the JSON file written (and read by --append "
                   "and --markdown); default bench/peers/results.json")
    p.add_argument("--markdown", action="store_true", help="print the tables of the results file")
    a = p.parse_args()
    if a.markdown:
        with open(a.results) as f:
            print(markdown(json.load(f)))
        return
    res = measure(a)
    print(markdown(res))


if __name__ == "__main__":
    main()
