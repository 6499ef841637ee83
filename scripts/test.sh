#!/usr/bin/env bash
# The README's test command, and CI's (.ci/run). In order, stopping at the first failure:
#   1. install what is missing, build (Release, build/) and run every test through CTest,
#      then the Python bindings' pytest suite against build/python; then install to a
#      temporary prefix and build tests/consumer against it (find_package(tapegrad), as a
#      user's project);
#   1b. `pip install .` into a fresh venv that holds transformers==4.49.0 (the Hugging Face
#      references: tests/python/test_hf_parity.py and the tokenizer and safetensors tests;
#      downloaded while stage 1 builds), and the same pytest suite against that install,
#      those references required; both pytest runs use one worker per core (pytest-xdist);
#   1c. a Debug build of the library alone (build-debug/), unoptimised with AVX-512 code
#      generation whatever this machine is, so the plain Debug build keeps compiling;
#   2. build the whole tree again for the baseline x86-64 (TAPEGRAD_NATIVE=OFF: library,
#      programs, tools, benchmarks, tests) with AddressSanitizer + UndefinedBehaviorSanitizer
#      (TAPEGRAD_SANITIZE=ON, -O1, build-asan/) and run every test: any sanitizer report,
#      LeakSanitizer's included, fails the run;
#   2b. ThreadSanitizer (TAPEGRAD_TSAN=ON, build-tsan/): the library and the [threads]
#      tests (tapegrad_thread_tests), the threading contract of docs/RELIABILITY.md;
#   3. tools/rss_growth: 1,000 Transformer training steps must not grow RSS by over 1 MiB;
#   4. fuzz/run.sh: build the libFuzzer targets with clang (build-fuzz/) and fuzz the npz,
#      npy and checkpoint readers for TAPEGRAD_FUZZ_SECONDS each (default 20).
# Each stage's wall time is printed at the end. TAPEGRAD_TEST_QUICK=1 runs step 1 only.
# docs/BUILDING.md has the measured times ("What the test command costs").
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=$(nproc)
# Each stage's wall time, printed at the end (also when a stage fails).
stage_names=() stage_seconds=() stage=""
end_stage() {
  [[ -n "$stage" ]] || return 0
  stage_names+=("$stage") stage_seconds+=($((SECONDS - stage_start)))
  stage=""
}
print_stage_times() {
  local status=$?
  end_stage
  if [[ -n "${venv_pid:-}" ]]; then kill "$venv_pid" 2>/dev/null || true; fi
  if [[ -n "${venv:-}" ]]; then rm -rf "$venv" "$venv_log"; fi
  printf '\n== test.sh: time per stage (%s)\n' "$([[ $status == 0 ]] && echo passed || echo "failed, exit $status")"
  for i in "${!stage_names[@]}"; do
    printf '%6d s  %s\n' "${stage_seconds[$i]}" "${stage_names[$i]}"
  done
  printf '%6d s  total\n' "$SECONDS"
}
trap print_stage_times EXIT
# Ninja for a new build folder; one made earlier keeps its generator.
configure() {
  local dir=$1 generator=()
  shift
  [[ -f "$dir/CMakeCache.txt" ]] || generator=(-G Ninja)
  cmake -S "$root" -B "$dir" "${generator[@]}" "$@" >/dev/null
}
step() {
  end_stage
  stage=$1 stage_start=$SECONDS
  printf '\n== test.sh: %s (%s)\n' "$1" "$(date +%T)"
}

step "Release build and tests"
"$root/scripts/install-deps.sh" --test
# The interpreter python/CMakeLists.txt builds the module for: Debian's, where
# python3-numpy/-pytest live (checked against CMake's choice after the build).
py=/usr/bin/python3
[[ -x "$py" ]] || py=$(command -v python3)
# A venv for stage 1b with the Hugging Face references: transformers==4.49.0, the release
# the tests were measured against (newer ones refuse Debian's torch 1.13), which brings
# tokenizers and safetensors. Made in the background while the library builds (pip waits on
# the network, the compiler on the cores); stage 1b waits for $venv_pid.
venv="" venv_log="" venv_pid=""
start_venv() {
  [[ "${TAPEGRAD_TEST_QUICK:-0}" != 1 ]] || return 0
  venv=$(mktemp -d) venv_log=$(mktemp)
  ( "$py" -m venv --system-site-packages "$venv" &&
    "$venv/bin/pip" install -q --disable-pip-version-check transformers==4.49.0 ) >"$venv_log" 2>&1 &
  venv_pid=$!
}
start_venv
"$root/scripts/build.sh"
(cd "$root/build" && ctest --output-on-failure -j "$jobs")

step "Python bindings: pytest against the build tree"
# The interpreter CMake built the module for (Debian's, where python3-numpy/-pytest live).
# (FindPython keeps it as the internal _Python_EXECUTABLE.)
cmake_py=$(sed -n 's/^_\{0,1\}Python_EXECUTABLE:[A-Z]*=//p' "$root/build/CMakeCache.txt" | head -n 1)
if [[ -n "$cmake_py" && "$(readlink -f "$cmake_py")" != "$(readlink -f "$py")" ]]; then
  # The module was built for another interpreter (-DPython_EXECUTABLE=...): the venv is
  # made again for that one at stage 1b.
  [[ -z "$venv_pid" ]] || wait "$venv_pid" || true
  rm -rf "$venv" "$venv_log"
  py=$cmake_py
  start_venv
fi
# -n: pytest-xdist, one worker per core; most tests wait on the interpreter, not on BLAS.
pytest=(-m pytest -q -p no:cacheprovider -n "$jobs")
PYTHONPATH="$root/build/python" "$py" "${pytest[@]}" "$root/tests/python"

step "installed package: a consumer project built with find_package(tapegrad)"
"$root/tests/consumer/run.sh" "$root/build"
if [[ "${TAPEGRAD_TEST_QUICK:-0}" == 1 ]]; then
  echo "test.sh: TAPEGRAD_TEST_QUICK=1: Debug build, sanitizers, RSS check and fuzzing skipped"
  exit 0
fi

step "Python bindings: pip install . into a fresh venv, pytest against it"
# --system-site-packages: numpy and pytest from Debian; pip fetches scikit-build-core from
# PyPI and builds with the same CMake in build-pip/, where ccache serves the library's
# objects from the Release build above: only the module's own files compile again.
if ! wait "$venv_pid"; then
  cat "$venv_log" >&2
  echo "test.sh: making the venv with transformers==4.49.0 failed (above)" >&2
  exit 1
fi
CMAKE_BUILD_PARALLEL_LEVEL="$jobs" "$venv/bin/pip" install -q --disable-pip-version-check "$root"
# TAPEGRAD_REQUIRE_HF=1: a reference that is missing fails its tests instead of skipping them.
(cd "$venv" && TAPEGRAD_REQUIRE_HF=1 TAPEGRAD_BUILD_DIR="$root/build" "$venv/bin/python" "${pytest[@]}" "$root/tests/python")
rm -rf "$venv" "$venv_log"

step "Debug build of the library (-O0, AVX-512 code)"
# Compiled only, never run, so -march=x86-64-v4 works on any x86 machine: GCC 12 broke the
# unoptimised AVX-512 build (platform/xsimd_shim), and this keeps it from breaking again.
configure "$root/build-debug" -DCMAKE_BUILD_TYPE=Debug -DTAPEGRAD_NATIVE=OFF \
  -DCMAKE_CXX_FLAGS=-march=x86-64-v4 -DTAPEGRAD_BUILD_TESTS=OFF -DTAPEGRAD_BUILD_EXAMPLES=OFF
cmake --build "$root/build-debug" -j "$jobs" --target tapegrad

step "AddressSanitizer + UndefinedBehaviorSanitizer build and tests"
# -O1 -g1 (line tables): lighter to compile than RelWithDebInfo, still readable reports.
# TAPEGRAD_NATIVE=OFF: with -march=native (AVX-512) GCC 12 gives some locals 64-byte
# alignment and loads them with aligned vector moves, but detect_stack_use_after_return
# moves locals to ASan's fake stack, which does not keep that alignment: the test binary
# then crashed on a vmovdqa64 in tests/test_tasks.cpp, depending on code layout. The
# Release build above runs the same tests with the native (AVX-512) kernels.
# It is also the portable build's proof: every target (the benchmarks too) compiles without
# -march=native, and the tests then run the kernels' run-time dispatch (f32 and bf16
# products, attention) from a baseline binary. The Python module is left out: its
# sanitized build could only be loaded with ASan preloaded into the interpreter.
configure "$root/build-asan" -DTAPEGRAD_SANITIZE=ON -DTAPEGRAD_NATIVE=OFF \
  -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" -DTAPEGRAD_BUILD_BENCH=ON \
  -DTAPEGRAD_BUILD_PYTHON=OFF
# all: both test binaries and every program the tests run (trainer, saturation, gradcheck,
# rss_growth, ...), built sanitized too, so their own reports fail their tests; the tools
# and benchmarks besides.
cmake --build "$root/build-asan" -j "$jobs"
# detect_stack_use_after_return: an xtensor expression returned as `auto` that still
# refers to a local of the function that built it.
# No LeakSanitizer suppressions are needed: OpenBLAS, libzip and the thread pool ran clean.
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:detect_stack_use_after_return=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
(cd "$root/build-asan" && ctest --output-on-failure -j "$jobs" --timeout 1200)
unset ASAN_OPTIONS UBSAN_OPTIONS

step "ThreadSanitizer: the thread tests"
# The threading contract (docs/RELIABILITY.md, "Threads"): shared parameters read, saved and
# given gradients by several threads at once, and the kernels' own threads. Only the
# library and the thread tests are built (tapegrad_thread_tests), to keep the stage short.
configure "$root/build-tsan" -DTAPEGRAD_TSAN=ON -DTAPEGRAD_NATIVE=OFF \
  -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -g1" -DTAPEGRAD_BUILD_EXAMPLES=OFF \
  -DTAPEGRAD_BUILD_PYTHON=OFF
cmake --build "$root/build-tsan" -j "$jobs" --target tapegrad_thread_tests
# OpenBLAS's own threads are not instrumented: one BLAS thread, tapegrad's pool as usual.
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" OPENBLAS_NUM_THREADS=1 \
  "$root/build-tsan/tests/tapegrad_thread_tests" "[threads]"

step "RSS over 1,000 training steps"
"$root/build/tools/rss_growth" --steps 1000 --max-growth-kb 1024

step "fuzzing (${TAPEGRAD_FUZZ_SECONDS:-20} s per target)"
"$root/fuzz/run.sh" "${TAPEGRAD_FUZZ_SECONDS:-20}"

end_stage
echo "== test.sh: all passed"
