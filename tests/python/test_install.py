"""`cmake --install` puts an importable package under the prefix."""
import subprocess
import sys


def test_cmake_install_gives_an_importable_package(build_dir, tmp_path):
    subprocess.run(["cmake", "--install", str(build_dir), "--prefix", str(tmp_path), "--component", "python"],
                   check=True, stdout=subprocess.DEVNULL)
    site = tmp_path / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    code = "import tapegrad, numpy; print(tapegrad.__file__); print(tapegrad.tensor(numpy.ones(2)).numpy().sum())"
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env={"PYTHONPATH": str(site)},
                         check=True, capture_output=True, text=True)
    assert run.stdout.splitlines() == [str(site / "tapegrad" / "__init__.py"), "2.0"]
