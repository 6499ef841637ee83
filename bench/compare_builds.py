#!/usr/bin/env python3
"""One framework's binary from two builds (e.g. an earlier commit and this one), side by side.

Runs `tapegrad_bench` from OLD and NEW build directories alternately (round 1: old then new,
round 2: new then old, ...) on the same workloads and thread counts, as run_bench.py
alternates the two frameworks, and prints per workload the pooled median and minimum of
each build, the median process CPU time per step, and new/old of each. A change that should not move a workload's time shows as a
new/old ratio within the machine's noise; the minimum is the figure least moved by other
programs on the machine.

  python3 bench/compare_builds.py --old OLD/build-bench --new build-bench \\
      --filter '^mha_fwdbwd' --threads 1,2 --rounds 6 [--json out.json]

--new-suffix _alibi runs each workload W of the old build against W_alibi of the new one (the
same workload with a modifier on), so the ratio is what turning it on costs; with
--old-suffix _alibi as well, the ratio is what a change did to that cost.
"""
import argparse
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_bench  # noqa: E402  (plan(), the timing plan of every workload)


def run(binary, workload, threads, warmup, repeats, check):
    import subprocess
    cmd = [binary, "--workload", workload, "--threads", str(threads), "--repeats", str(repeats),
           "--warmup", str(warmup)] + ([] if check else ["--skip-check"])
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        sys.exit(f"{binary} {workload}: exit {p.returncode}: {p.stderr.strip()[-300:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", required=True, help="build directory of the earlier code")
    ap.add_argument("--new", required=True, help="build directory of this code")
    ap.add_argument("--filter", default="^mha_fwdbwd", help="workload regex")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--json", help="write every sample here")
    ap.add_argument("--new-suffix", default="",
                    help="the new build runs W + this suffix (e.g. _alibi, _softcap)")
    ap.add_argument("--old-suffix", default="",
                    help="the old build runs W + this suffix (both suffixes alike: a change to "
                         "a modifier's cost)")
    args = ap.parse_args()
    bins = {b: os.path.join(getattr(args, b), "bench", "tapegrad_bench") for b in ("old", "new")}
    names = run_bench.workloads(bins["old"])
    new_names = set(run_bench.workloads(bins["new"]))
    old_names = set(names)
    names = [w for w in names if re.search(args.filter, w) and w + args.new_suffix in new_names
             and w + args.old_suffix in old_names]
    asked = {"old": lambda w: w + args.old_suffix, "new": lambda w: w + args.new_suffix}
    out = []
    print(f"{'workload':<20} th  {'old med':>9} {'new med':>9} {'new/old':>7}  "
          f"{'old min':>9} {'new min':>9} {'new/old':>7}  {'old cpu':>9} {'new cpu':>9} {'new/old':>7}")
    for w in names:
        warmup, repeats, _ = run_bench.plan(w, False)
        for thr in (int(t) for t in args.threads.split(",")):
            samples = {"old": [], "new": []}
            cpu = {"old": [], "new": []}  # process CPU time per step: at 1 thread, the wall
            # time minus the time other programs held the core
            for b in bins:  # each build's start-up check once, untimed
                run(bins[b], asked[b](w), thr, 0, 1, True)
            for rnd in range(args.rounds):
                for b in (("old", "new") if rnd % 2 == 0 else ("new", "old")):
                    rec = run(bins[b], asked[b](w), thr, warmup, repeats, False)
                    samples[b] += rec["samples_ms"]
                    cpu[b] += rec.get("cpu_samples_ms", [])
            med = {b: statistics.median(s) for b, s in samples.items()}
            mn = {b: min(s) for b, s in samples.items()}
            cp = {b: statistics.median(s) for b, s in cpu.items()}
            print(f"{w:<20} {thr}  {run_bench.fmt_ms(med['old']):>9} {run_bench.fmt_ms(med['new']):>9} "
                  f"{med['new'] / med['old']:7.3f}  {run_bench.fmt_ms(mn['old']):>9} "
                  f"{run_bench.fmt_ms(mn['new']):>9} {mn['new'] / mn['old']:7.3f}  "
                  f"{run_bench.fmt_ms(cp['old']):>9} {run_bench.fmt_ms(cp['new']):>9} "
                  f"{cp['new'] / cp['old']:7.3f}", flush=True)
            out.append({"workload": w, "new_workload": asked["new"](w), "threads": thr, "rounds": args.rounds, "median_ms": med,
                        "min_ms": mn, "cpu_median_ms": cp,
                        "samples_ms": samples, "cpu_samples_ms": cpu})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
