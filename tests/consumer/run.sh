#!/usr/bin/env bash
# Installs the tapegrad built in BUILD_DIR into a temporary prefix, checks that the
# installed package finds its dependencies by name (no library path of this machine baked
# into tapegradTargets*.cmake), then builds tests/consumer against it with find_package
# and runs it. Leaves nothing behind.
#   tests/consumer/run.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: tests/consumer/run.sh BUILD_DIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
# A dependency named by absolute path breaks on any machine where it lives elsewhere.
if grep -nE '(^|[";( :<>])/(usr|opt|lib|home|nix)/' "$tmp"/prefix/lib*/cmake/tapegrad/tapegradTargets*.cmake; then
  echo "consumer: the installed tapegradTargets name a file by absolute path (above)" >&2
  exit 1
fi
cmake -S "$here" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$tmp/prefix" >/dev/null
cmake --build "$tmp/build" -j "$(nproc)" >/dev/null
"$tmp/build/xor_mlp"
