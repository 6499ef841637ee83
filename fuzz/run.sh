#!/usr/bin/env bash
# Builds the libFuzzer targets with clang in build-fuzz/ and fuzzes each for a while,
# starting from the committed seeds in fuzz/corpus/<target>. New inputs go to
# build-fuzz/corpus/<target> (kept between runs, never written into the repository).
# A crash, a sanitizer report, an uncaught exception, an input slower than 5 s, a single
# allocation over 1 GiB or an RSS over 2 GiB fails the run; the input is saved as
# build-fuzz/artifacts/<target>-crash-* (rerun it: build-fuzz/fuzz_<target> FILE).
# The targets run side by side, one per core (or per TAPEGRAD_FUZZ_JOBS cores).
#   fuzz/run.sh                   20 s per target (what scripts/test.sh runs)
#   fuzz/run.sh 3600              an hour per target
#   fuzz/run.sh 600 npy           one target
# Environment: TAPEGRAD_FUZZ_BUILD (default build-fuzz), TAPEGRAD_FUZZ_JOBS (parallel
# fuzzing processes per target, default 1).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-20}
shift || true
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(npz npy checkpoint safetensors hf_config)
build=${TAPEGRAD_FUZZ_BUILD:-$root/build-fuzz}
jobs=${TAPEGRAD_FUZZ_JOBS:-1}
if ! [[ "$seconds" =~ ^[0-9]+$ && "$seconds" -ge 1 ]]; then
  echo "fuzz/run.sh: the run length must be a whole number of seconds, got '$seconds'" >&2
  exit 2
fi
for t in "${targets[@]}"; do
  if [[ ! -d "$root/fuzz/corpus/$t" ]]; then
    echo "fuzz/run.sh: unknown target '$t' (npz, npy, checkpoint, safetensors or hf_config)" >&2
    exit 2
  fi
done

cmake -S "$root/fuzz" -B "$build" -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "$build" -j "$(nproc)" --target "${targets[@]/#/fuzz_}"

# One target's run; its summary line goes to $build/fuzz_$t.summary, its log to fuzz_$t.log.
fuzz_one() {
  local t=$1 log="$build/fuzz_$1.log" dict="$root/fuzz/$1.dict"
  mkdir -p "$build/corpus/$t" "$build/artifacts"
  [[ -f "$dict" ]] || dict="$root/fuzz/npy.dict"  # the target's own, else the npy one its formats share
  local args=(-dict="$dict" -max_total_time="$seconds" -timeout=5
        -rss_limit_mb=2048 -malloc_limit_mb=1024 -print_final_stats=1
        -artifact_prefix="$build/artifacts/$t-")
  if [[ "$jobs" -gt 1 ]]; then args+=(-fork="$jobs" -ignore_crashes=0); fi
  if "$build/fuzz_$t" "${args[@]}" "$build/corpus/$t" "$root/fuzz/corpus/$t" >"$log" 2>&1; then
    local runs rate cov corpus
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    corpus=$(find "$build/corpus/$t" -type f | wc -l)
    printf 'fuzz: %-10s ok: %s s, %s runs, %s exec/s, %s, %s inputs in build corpus\n' \
      "$t" "$seconds" "${runs:-?}" "${rate:-?}" "${cov:-cov: ?}" "$corpus"
  else
    echo "fuzz: $t FAILED (log: $log); the end of the log:"
    tail -n 60 "$log"
    return 1
  fi
}

# A libFuzzer process keeps one core busy: as many targets at once as there are cores, each
# for the whole of its time, so the stage takes ceil(targets / cores) runs of $seconds.
slots=$(( $(nproc) / jobs )); (( slots >= 1 )) || slots=1
pids=()
for t in "${targets[@]}"; do
  while (( $(jobs -rp | wc -l) >= slots )); do wait -n || true; done
  fuzz_one "$t" >"$build/fuzz_$t.summary" 2>&1 &
  pids+=($!)
done
status=0
for i in "${!targets[@]}"; do
  if wait "${pids[$i]}"; then
    cat "$build/fuzz_${targets[$i]}.summary"
  else
    cat "$build/fuzz_${targets[$i]}.summary" >&2
    status=1
  fi
done
exit $status
