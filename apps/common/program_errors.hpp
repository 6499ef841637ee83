#pragma once
// How a program ends on an error: a usage error, or memory that ran out, exits 2 with one
// line; any other error (a file that cannot be written, after the work) exits 1. Each line
// starts with the program's name.
#include <cstdio>
#include <exception>
#include <new>

#include "apps/common/cli.hpp"
#include "apps/common/memory_budget.hpp"
#include "apps/common/run_options.hpp"

namespace tapegrad::apps {

template <class Body>
int run_reporting_errors(const char* program, Body&& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    std::fprintf(stderr, "%s: usage error: %s\n", program, one_line(e.what()).c_str());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "%s: %s\n", program, out_of_memory_message().c_str());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, one_line(e.what()).c_str());
    return 1;
  }
}

}  // namespace tapegrad::apps
