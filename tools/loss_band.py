#!/usr/bin/env python3
"""Training-loss curves of runs in two groups, as one SVG: the first group's spread (the band
between its lowest and highest smoothed loss at each step) and each run of the second drawn
over it; prints how many of the second group's steps lie inside the band.

  python3 tools/loss_band.py --band out/f32_s1 out/f32_s2 out/f32_s3 --runs out/bf16_s1 \\
      --band-label "float32, seeds 1-3" --runs-label bf16 --smooth 25 --out loss.svg

Each run folder holds the trainer's loss.csv (step, loss, ...). No dependencies.
"""
import argparse
import csv
import os
import sys


def read_losses(folder):
    with open(os.path.join(folder, "loss.csv")) as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"loss_band: {folder}/loss.csv has no rows")
    return [int(r["step"]) for r in rows], [float(r["loss"]) for r in rows]


def smooth(values, window):
    """The mean of the last `window` values at each step (fewer at the start)."""
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def polyline(steps, values, x, y, colour, width=1.5):
    points = " ".join(f"{x(s):.1f},{y(v):.1f}" for s, v in zip(steps, values))
    return f'<polyline fill="none" stroke="{colour}" stroke-width="{width}" points="{points}"/>'


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--band", nargs="+", required=True, help="run folders whose spread is the band")
    ap.add_argument("--runs", nargs="+", required=True, help="run folders drawn over the band")
    ap.add_argument("--band-label", default="band")
    ap.add_argument("--runs-label", default="runs")
    ap.add_argument("--smooth", type=int, default=25, help="steps in the moving mean")
    ap.add_argument("--skip", type=int, default=50, help="leading steps left out of the count")
    ap.add_argument("--title", default="training loss")
    ap.add_argument("--out", required=True, help="the SVG to write")
    a = ap.parse_args()
    if a.smooth < 1:
        sys.exit("loss_band: --smooth must be at least 1")

    band = [read_losses(d) for d in a.band]
    runs = [read_losses(d) for d in a.runs]
    steps = band[0][0]
    for s, _ in band + runs:
        if s != steps:
            sys.exit("loss_band: the runs do not log the same steps")
    band_curves = [smooth(v, a.smooth) for _, v in band]
    lo = [min(c[i] for c in band_curves) for i in range(len(steps))]
    hi = [max(c[i] for c in band_curves) for i in range(len(steps))]
    run_curves = [smooth(v, a.smooth) for _, v in runs]

    for folder, curve in zip(a.runs, run_curves):
        counted = range(min(a.skip, len(steps)), len(steps))
        inside = sum(1 for i in counted if lo[i] <= curve[i] <= hi[i])
        outside = max(max(lo[i] - curve[i], curve[i] - hi[i], 0.0) for i in counted)
        width = sum(hi[i] - lo[i] for i in counted) / len(counted)
        print(f"{folder}: {inside} of {len(counted)} steps inside the band "
              f"(steps {steps[counted.start]}-{steps[-1]}, moving mean of {a.smooth}); "
              f"at most {outside:.4f} outside it, its mean width {width:.4f}")

    W, H, m = 720, 420, 60
    shown = [v for c in band_curves + run_curves for v in c[a.skip:]]
    vmin, vmax = min(shown), max(shown)
    x = lambda s: m + (s - steps[0]) / max(1, steps[-1] - steps[0]) * (W - 2 * m)
    y = lambda v: H - m - (min(max(v, vmin), vmax) - vmin) / max(1e-12, vmax - vmin) * (H - 2 * m)
    band_points = [(x(s), y(v)) for s, v in zip(steps, hi)] + \
                  [(x(s), y(v)) for s, v in reversed(list(zip(steps, lo)))]
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           'font-family="sans-serif" font-size="12">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{m}" y="20" font-size="14">{a.title}</text>',
           '<polygon fill="#9ecae1" stroke="none" points="' +
           " ".join(f"{px:.1f},{py:.1f}" for px, py in band_points) + '"/>']
    colours = ["#d62728", "#ff7f0e", "#2ca02c", "#9467bd"]
    for i, curve in enumerate(run_curves):
        svg.append(polyline(steps, curve, x, y, colours[i % len(colours)]))
    svg.append(f'<rect x="{m}" y="{m}" width="{W - 2 * m}" height="{H - 2 * m}" fill="none" stroke="#999"/>')
    for k in range(5):
        v = vmin + (vmax - vmin) * k / 4
        svg.append(f'<text x="{m - 6}" y="{y(v) + 4:.1f}" text-anchor="end">{v:.2f}</text>')
        s = steps[0] + (steps[-1] - steps[0]) * k / 4
        svg.append(f'<text x="{x(s):.1f}" y="{H - m + 16}" text-anchor="middle">{s:.0f}</text>')
    svg.append(f'<text x="{W / 2}" y="{H - 12}" text-anchor="middle">step</text>')
    svg.append(f'<rect x="{W - m - 230}" y="{m + 10}" width="14" height="10" fill="#9ecae1"/>'
               f'<text x="{W - m - 210}" y="{m + 19}">{a.band_label} (lowest to highest)</text>')
    for i, folder in enumerate(a.runs):
        yy = m + 34 + 16 * i
        svg.append(f'<line x1="{W - m - 230}" y1="{yy - 4}" x2="{W - m - 216}" y2="{yy - 4}" '
                   f'stroke="{colours[i % len(colours)]}" stroke-width="2"/>'
                   f'<text x="{W - m - 210}" y="{yy}">{a.runs_label}: {os.path.basename(folder.rstrip("/"))}</text>')
    svg.append("</svg>")
    with open(a.out, "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    main()
