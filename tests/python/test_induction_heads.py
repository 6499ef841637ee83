"""examples/python/induction_heads.py trains the attention-only model, finds the induction
heads in layer 1 through run_with_cache, zeroes each head through run_with_hooks, and plots
a pattern."""
import re
import subprocess
import sys

from conftest import ROOT


def test_the_script_finds_layer_one_induction_heads(tmp_path):
    png = tmp_path / "pattern.png"
    run = subprocess.run([sys.executable, str(ROOT / "examples" / "python" / "induction_heads.py"),
                          "--steps", "1500", "--plot", str(png)],
                         check=True, capture_output=True, text=True)
    first, repeat = map(float, re.search(r"first copy ([\d.]+), on the repeat ([\d.]+)", run.stdout).groups())
    assert first > 3.5 and repeat < 1.5, run.stdout
    heads = {m[0]: (float(m[1]), float(m[2]), float(m[3])) for m in
             re.findall(r"(L\dH\d): induction ([\d.]+)  previous-token ([\d.]+)  repeat loss with it zeroed ([\d.]+)",
                        run.stdout)}
    assert len(heads) == 4, run.stdout
    assert max(heads["L1H0"][0], heads["L1H1"][0]) > 0.5, run.stdout
    assert max(heads["L0H0"][1], heads["L0H1"][1]) > 0.4, run.stdout
    # zeroing the best induction head costs most of the repeat's advantage
    best = max(("L1H0", "L1H1"), key=lambda h: heads[h][0])
    assert heads[best][2] > repeat + 0.5 * (first - repeat), run.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
