#!/usr/bin/env bash
# The main job: install what is missing, build, train the toy transformer on its
# built-in task (sort) and print its held-out accuracy. Extra arguments go to the trainer
# (e.g. --task reverse; see --help).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/build.sh"
cd "$root"
exec build/examples/train_tiny_transformer --out out/train "$@"
