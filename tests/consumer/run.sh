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
# Nor may it impose compile options on its users (their -march is theirs to choose).
if grep -nE 'march|-include' "$tmp"/prefix/lib*/cmake/tapegrad/tapegradTargets*.cmake; then
  echo "consumer: the installed tapegradTargets impose compile options on users (above)" >&2
  exit 1
fi
# As a user builds it, then for the baseline x86-64 instruction set: the types tapegrad's
# headers declare (xt::xarray<bool>, ...) must be those the library was built with.
for flags in "" "-march=x86-64"; do
  cmake -S "$here" -B "$tmp/build$flags" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$tmp/prefix" \
    -DCMAKE_CXX_FLAGS="$flags" >/dev/null
  cmake --build "$tmp/build$flags" -j "$(nproc)" >/dev/null
  "$tmp/build$flags/xor_mlp"
done
