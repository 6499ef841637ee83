#!/usr/bin/env python3
"""The saturation study's findings 1 and 2 from Python: without 1/sqrt(d_k) the score
spread grows as sqrt(d_k) (finding 1), and the softmax rows saturate into near one-hot
rows (finding 2). The draws are the C++ study's (the same Generator, seeds and order), so
the numbers agree with build/examples/saturation's sweep.csv for the same options.

    python3 examples/python/saturation_sweep.py --out out/py_saturation
    python3 examples/python/saturation_sweep.py --compare out/saturation/sweep.csv

Writes sweep_py.csv, score_std.png (finding 1) and saturation.png (finding 2)."""
import argparse
import csv
import math
import pathlib
import sys

import numpy as np
import tapegrad as tg

M64 = (1 << 64) - 1


def mix(x):  # splitmix64, as examples/saturation: one seed per (Tk, d_k, chunk)
    x = (x + 0x9E3779B97F4A7C15) & M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def measure(tk, d_k, o):
    """Per scale: score sums, per-row largest weight and entropy over every chunk."""
    B, chunks = o.chunk_rows // o.queries, o.rows // o.chunk_rows
    scales = {"scaled": 1 / math.sqrt(d_k), "unscaled": 1.0}
    acc = {s: {"sum": 0.0, "sq": 0.0, "n": 0, "maxw": [], "ent": []} for s in scales}
    for c in range(chunks):
        gen = tg.Generator(mix(o.seed ^ mix(((tk * 1000003 + d_k) * 1000003 + c) & M64)))
        Q, K = tg.randn([B, o.queries, d_k], gen, dtype="float64"), tg.randn([B, tk, d_k], gen, dtype="float64")
        with tg.no_grad():  # findings 1 and 2 need the forward only
            for name, scale in scales.items():
                scores = tg.matmul_nt(Q, K) * scale
                w = tg.softmax(scores, axis=-1).numpy().reshape(-1, tk)
                s, a = scores.numpy(), acc[name]
                a["sum"] += s.sum(); a["sq"] += (s * s).sum(); a["n"] += s.size
                a["maxw"].append(w.max(-1))
                a["ent"].append(-np.where(w > 0, w * np.log(np.where(w > 0, w, 1)), 0).sum(-1))
    rows = []
    for name, a in acc.items():
        mean, maxw = a["sum"] / a["n"], np.concatenate(a["maxw"])
        rows.append({"tk": tk, "d_k": d_k, "scaling": name,
                     "score_std": math.sqrt(max(0.0, a["sq"] / a["n"] - mean * mean)),
                     "theory_std": math.sqrt(d_k) * scales[name], "mean_max_weight": maxw.mean(),
                     "mean_entropy": np.concatenate(a["ent"]).mean(), "log_tk": math.log(tk),
                     "frac_max_weight_gt_0.99": (maxw > 0.99).mean()})
    return rows


def plot(rows, o, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    for figure, keys in (("score_std.png", ["score_std"]),
                         ("saturation.png", ["mean_max_weight", "frac_max_weight_gt_0.99"])):
        fig, axes = plt.subplots(1, len(keys), figsize=(6 * len(keys), 4), squeeze=False)
        for ax, key in zip(axes[0], keys):
            for tk in o.tk:
                for name, style in (("unscaled", "-o"), ("scaled", "--s")):
                    pts = [r for r in rows if r["tk"] == tk and r["scaling"] == name]
                    ax.plot([r["d_k"] for r in pts], [r[key] for r in pts], style, label=f"{name}, Tk {tk}")
            if key == "score_std":
                ax.plot(o.d_k, np.sqrt(o.d_k), ":k", label="sqrt(d_k)")
                ax.set_yscale("log", base=2)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("d_k")
            ax.set_title(key.replace("frac_max_weight_gt_0.99", "rows with a weight > 0.99"))
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(out / figure, dpi=100)
        plt.close(fig)


def compare(rows, path):
    """The largest relative difference from examples/saturation's sweep.csv."""
    with open(path) as f:
        ref = {(int(r["tk"]), int(r["d_k"]), r["scaling"]): r for r in csv.DictReader(f)}
    worst = 0.0
    for r in rows:
        c = ref[(r["tk"], r["d_k"], r["scaling"])]
        for k in ("score_std", "mean_max_weight", "mean_entropy", "frac_max_weight_gt_0.99"):
            worst = max(worst, abs(r[k] - float(c[k])) / max(abs(float(c[k])), 1e-300))
    return worst


class OneLineParser(argparse.ArgumentParser):
    def error(self, message):  # a usage error: one line, exit 2, nothing written
        print(f"saturation_sweep: {message}", file=sys.stderr)
        sys.exit(2)


def main():
    ints = lambda s: [int(x) for x in s.split(",")]
    ap = OneLineParser(description=__doc__.split("\n")[0])
    ap.add_argument("--d-k", type=ints, default=[4, 8, 16, 32, 64, 128, 256, 512, 1024])
    ap.add_argument("--tk", type=ints, default=[16, 64, 256])
    ap.add_argument("--rows", type=int, default=8192)
    ap.add_argument("--chunk-rows", type=int, default=1024)
    ap.add_argument("--queries", type=int, default=16, help="queries per group of keys (Tq)")
    ap.add_argument("--seed", type=int, default=1, help="the C++ study's --sweep-seed")
    ap.add_argument("--out", default="out/py_saturation")
    ap.add_argument("--compare", help="examples/saturation's sweep.csv for the same options")
    o = ap.parse_args()
    if o.chunk_rows % o.queries or o.rows % o.chunk_rows or (o.rows // o.chunk_rows) % 2:
        print("saturation_sweep: --rows must be an even number of --chunk-rows, "
              "a chunk a whole number of --queries", file=sys.stderr)
        return 2
    rows = [r for tk in o.tk for d_k in o.d_k for r in measure(tk, d_k, o)]
    out = pathlib.Path(o.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "sweep_py.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    plot(rows, o, out)
    for tk in o.tk:
        un = [r for r in rows if r["tk"] == tk and r["scaling"] == "unscaled"]
        print(f"Tk {tk}: unscaled score std / sqrt(d_k): "
              + ", ".join(f"{r['score_std'] / math.sqrt(r['d_k']):.3f}" for r in un)
              + f"; rows > 0.99: {un[0]['frac_max_weight_gt_0.99']:.1%} at d_k {un[0]['d_k']}"
              f" -> {un[-1]['frac_max_weight_gt_0.99']:.1%} at d_k {un[-1]['d_k']}")
    if o.compare:
        print(f"largest relative difference from {o.compare}: {compare(rows, o.compare):.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
