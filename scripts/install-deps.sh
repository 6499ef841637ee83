#!/usr/bin/env bash
# Installs the Debian 12 packages tapegrad needs, and only those that are missing.
# Idempotent and quick when nothing is missing. apt-get as root, sudo otherwise.
#   scripts/install-deps.sh            what the library, the programs and the main command need
#   scripts/install-deps.sh --test     also what only the test command needs
#   scripts/install-deps.sh --bench    also libtorch-dev and python3-torch (the benchmarks' references)
set -euo pipefail

packages=(
  cmake g++ make ninja-build ccache pkg-config  # toolchain (ccache: rebuilds are cheap; pkg-config finds libzip)
  libxtensor-dev xtl-dev libxsimd-dev libxtensor-blas-dev libopenblas-dev
  libfmt-dev libzip-dev libcli11-dev  # formatting, .npz checkpoints, example CLIs
  libpcre2-dev                        # text/: the BPE tokenizer's GPT-4 split pattern
  nlohmann-json3-dev                  # the programs' JSON files (metrics.json, gradcheck --json)
  catch2                              # tests (Catch2 v2; built with the library by default)
)
test_packages=(
  python3-numpy                       # tests: numpy reads the checkpoints we write
  python3-torch                       # tests: tools/to_torch.py against the torch module
  libopenmpi-dev openmpi-bin          # tests: the trainer's --data-parallel under mpirun
  clang libclang-rt-14-dev llvm       # fuzz/: libFuzzer + sanitizer runtimes, llvm-symbolizer
  pybind11-dev python3-dev            # python/: the extension module
  python3-pytest python3-pytest-xdist python3-venv python3-matplotlib  # tests/python (one worker a core), pip install . into a venv
  bible-kjv                           # tests and the tokenizer bench: the KJV as a corpus
)
for arg in "$@"; do
  case "$arg" in
    --test) packages+=("${test_packages[@]}") ;;
    --bench) packages+=(libtorch-dev python3-torch) ;;  # python3-torch: bench/python
    *) echo "install-deps: unknown option $arg (use --test or --bench)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
if [[ $(id -u) -eq 0 ]]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "install-deps: need root or sudo to install: ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -q
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
