#!/usr/bin/env bash
# The main job: install what is missing, build, train the toy transformer on its
# built-in task (sort) and print its held-out accuracy. Extra arguments go to the trainer
# (e.g. --task reverse; see --help).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The trainer and the library only: the tests are the test command's to build.
TAPEGRAD_BUILD_TARGET=train_tiny_transformer "$root/scripts/build.sh"
cd "$root"
exec build/examples/train_tiny_transformer --out out/train "$@"
