// Code written against the header paths of the previous release still builds: each public
// header that moved keeps a forwarding header at its old path for one release (including
// one prints a deprecation note naming the new path). Built into xor_mlp by run.sh, against
// the installed package, so a forwarding header that is not installed fails the build.
#include "autograd/simd.hpp"
#include "nn/checkpoint.hpp"
#include "nn/checkpoint_schema.hpp"
#include "nn/file_io.hpp"
#include "nn/io/file_io.hpp"
#include "nn/npy.hpp"
#include "nn/npz.hpp"
#include "nn/training_state.hpp"
#include "nn/untrusted_text.hpp"
#include "nn/zip_archive.hpp"
#include "ops/kernels/bf16_pairs.hpp"
#include "ops/kernels/gemm_bf16_amx.hpp"
#include "ops/kernels/precision.hpp"

// A name each forwarded header declares, so that an empty forwarding header fails too.
int consumer_moved_headers_answer() {
  using namespace tapegrad;
  const std::vector<NpzEntry> entries;
  return int(kCheckpointFormat > 0) + int(entries.empty()) +
         int(sizeof(CheckpointError) > 0) + int(sizeof(&kernels::gemm_bf16_amx) > 0) +
         int(kernels::matmul_precision() == kernels::MatmulPrecision::f32) +
         int(kMaxTextBytes > 0) + int(sizeof(IoError) > 0);
}
