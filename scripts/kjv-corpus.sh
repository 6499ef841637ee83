#!/usr/bin/env bash
# Writes the King James Version (Debian's bible-kjv, public domain, about 4.3 MB) to a text
# file, a corpus that needs no download: scripts/kjv-corpus.sh [out=kjv.txt]
set -euo pipefail
out=${1:-kjv.txt}
if ! command -v bible >/dev/null 2>&1; then
  echo "kjv-corpus: the bible program is missing; run scripts/install-deps.sh --test (bible-kjv)" >&2
  exit 1
fi
bible "gen1:1-rev22:21" > "$out.tmp"
mv "$out.tmp" "$out"
echo "kjv-corpus: wrote $out ($(wc -c < "$out") bytes)" >&2
