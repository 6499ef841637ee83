#!/usr/bin/env bash
# Configures and builds tapegrad (Release) in build/ after installing what is missing.
#   scripts/build.sh [extra cmake args...]
# TAPEGRAD_BUILD_TARGET=name builds that target (and what it needs) instead of everything.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$root/scripts/install-deps.sh"
# Ninja for a new build folder; one made earlier keeps the generator it was made with.
generator=()
[[ -f "$root/build/CMakeCache.txt" ]] || generator=(-G Ninja)
cmake -S "$root" -B "$root/build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$root/build" -j "$(nproc)" ${TAPEGRAD_BUILD_TARGET:+--target "$TAPEGRAD_BUILD_TARGET"}
