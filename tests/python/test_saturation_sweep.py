"""examples/python/saturation_sweep.py draws what examples/saturation draws and reports the
same numbers; its plots are written."""
import csv
import math
import subprocess
import sys

from conftest import ROOT

OPTS = ["--d-k", "4,256", "--tk", "16", "--rows", "512", "--chunk-rows", "256"]


def test_python_sweep_agrees_with_the_cpp_study(build_dir, tmp_path):
    cpp, py = tmp_path / "cpp", tmp_path / "py"
    # The sweep alone: the study's other parts (learning rates, positions, ablation) train
    # models, which this comparison does not read.
    sweep_only = ["--skip-training", "--skip-lr", "--skip-positions", "--skip-ablation"]
    subprocess.run([str(build_dir / "examples" / "saturation"), "--out", str(cpp)] + sweep_only + OPTS,
                   check=True, stdout=subprocess.DEVNULL)
    run = subprocess.run([sys.executable, str(ROOT / "examples" / "python" / "saturation_sweep.py"),
                          "--out", str(py), "--compare", str(cpp / "sweep.csv")] + OPTS,
                         check=True, capture_output=True, text=True)
    worst = float(run.stdout.strip().splitlines()[-1].split(":")[-1])
    assert worst < 1e-7, run.stdout  # the CSV prints 8 significant digits
    for png in ("score_std.png", "saturation.png"):
        assert (py / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = {(int(r["d_k"]), r["scaling"]): r for r in csv.DictReader(open(py / "sweep_py.csv"))}
    # Finding 1: unscaled spread ~ sqrt(d_k), scaled ~ 1.
    for d_k in (4, 256):
        assert abs(float(rows[d_k, "unscaled"]["score_std"]) / math.sqrt(d_k) - 1) < 0.05
        assert abs(float(rows[d_k, "scaled"]["score_std"]) - 1) < 0.05
    # Finding 2: unscaled rows saturate as d_k grows, scaled rows do not.
    assert float(rows[256, "unscaled"]["frac_max_weight_gt_0.99"]) > 0.3
    assert float(rows[256, "scaled"]["frac_max_weight_gt_0.99"]) == 0.0
    assert float(rows[4, "unscaled"]["frac_max_weight_gt_0.99"]) < 0.05


def test_bad_sizes_exit_2_with_one_line(tmp_path):
    run = subprocess.run([sys.executable, str(ROOT / "examples" / "python" / "saturation_sweep.py"),
                          "--rows", "300", "--out", str(tmp_path / "x")], capture_output=True, text=True)
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()
