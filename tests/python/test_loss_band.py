"""tools/loss_band.py: the band is the lowest to highest smoothed loss of the first group at
each step; a run that follows one of the band's runs lies inside it at every step, a run
shifted above the band lies outside it by the shift, and the SVG is written."""
import re
import subprocess
import sys

from conftest import ROOT


def write_run(folder, losses):
    folder.mkdir()
    lines = ["step,loss,lr,bits_per_byte"] + [f"{i + 1},{v},0.001,0" for i, v in enumerate(losses)]
    (folder / "loss.csv").write_text("\n".join(lines) + "\n")


def test_inside_and_outside_the_band(tmp_path):
    steps = 200
    base = [3.0 - 2.0 * i / steps for i in range(steps)]
    for k, offset in enumerate((-0.02, 0.0, 0.03)):
        write_run(tmp_path / f"band{k}", [v + offset for v in base])
    write_run(tmp_path / "inside", [v + 0.01 for v in base])
    write_run(tmp_path / "above", [v + 0.08 for v in base])
    svg = tmp_path / "band.svg"
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "loss_band.py"), "--band",
                          *(str(tmp_path / f"band{k}") for k in range(3)), "--runs",
                          str(tmp_path / "inside"), str(tmp_path / "above"), "--smooth", "5",
                          "--skip", "10", "--out", str(svg)], check=True, capture_output=True, text=True)
    rows = dict(re.findall(r"(inside|above): (\d+ of \d+) steps inside the band", run.stdout))
    assert rows == {"inside": "190 of 190", "above": "0 of 190"}, run.stdout
    outside = float(re.search(r"above: .* at most ([\d.]+) outside", run.stdout).group(1))
    assert abs(outside - 0.05) < 1e-9  # 0.08 above the base, the band's top at 0.03
    assert svg.read_text().startswith("<svg") and svg.read_text().count("<polyline") == 2


def test_runs_that_log_other_steps_are_refused(tmp_path):
    write_run(tmp_path / "a", [1.0, 0.9, 0.8])
    write_run(tmp_path / "b", [1.0, 0.9])
    run = subprocess.run([sys.executable, str(ROOT / "tools" / "loss_band.py"), "--band", str(tmp_path / "a"),
                          "--runs", str(tmp_path / "b"), "--out", str(tmp_path / "x.svg")],
                         capture_output=True, text=True)
    assert run.returncode != 0 and "do not log the same steps" in run.stderr
    assert not (tmp_path / "x.svg").exists()
