// checkpoint_schema: prints the checkpoint's schema as JSON (nn/io/checkpoint_schema.hpp);
// tools/checkpoint_schema.json is its output, which tools/to_torch.py reads.
//
//   checkpoint_schema > tools/checkpoint_schema.json
#include <cstdio>

#include "nn/io/checkpoint_schema.hpp"

int main() {
  std::fputs(tapegrad::checkpoint_schema_json().c_str(), stdout);
  return 0;
}
