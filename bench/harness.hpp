#pragma once
// The measuring instrument shared by tapegrad_bench and torch_reference: the command line,
// the workload list, deterministic inputs, the timing loop, peak RSS, the JSON line, and
// naive double-precision references used to check each framework's answer once at
// start-up (so a broken fast path cannot report a fast-looking number).
// The standard library and nlohmann-json only: neither framework is visible here.
// One header per part, under bench/harness/, each including the one before it.
#include "harness/args.hpp"
#include "harness/flash_reference.hpp"
#include "harness/inputs.hpp"
#include "harness/measure.hpp"
#include "harness/naive_references.hpp"
#include "harness/workloads.hpp"
