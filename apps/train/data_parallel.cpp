#include "apps/train/data_parallel.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#ifdef TAPEGRAD_WITH_MPI
#include <mpi.h>
#endif

namespace tapegrad::train {

std::size_t loss_targets(const tasks::Batch& b) {
  return static_cast<std::size_t>(
      std::count_if(b.targets.begin(), b.targets.end(),
                    [](std::int64_t t) { return t != tasks::kIgnore; }));
}

std::uint64_t parameter_checksum(const std::vector<Tensor<float>>& params) {
  std::uint64_t h = 1469598103934665603ULL;
  for (const Tensor<float>& p : params) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(p.data());
    for (std::size_t i = 0; i < p.size() * sizeof(float); ++i) h = (h ^ bytes[i]) * 1099511628211ULL;
  }
  return h;
}

std::string mpi_launch_variable() {
  // sizes above 1, or a rank above 0 where only the rank is set
  const struct {
    const char* name;
    long more_than;
  } variables[] = {{"OMPI_COMM_WORLD_SIZE", 1}, {"PMI_SIZE", 1}, {"PMIX_RANK", 0}};
  for (const auto& v : variables) {
    const char* value = std::getenv(v.name);
    if (value && std::strtol(value, nullptr, 10) > v.more_than) return std::string(v.name) + "=" + value;
  }
  return "";
}

void DataParallel::check_batch(std::size_t global_batch) const {
  if (global_batch % std::size_t(size_) != 0)
    throw DataParallelError(fmt::format("--data-parallel: --batch {} is not divisible by the {} "
                                        "ranks (each rank takes batch/ranks sequences)",
                                        global_batch, size_));
}

// global (B, T) -> this rank's (B/N, T): the rows are contiguous, so a copy of one block
tasks::Batch DataParallel::shard(const tasks::Batch& global) const {
  check_batch(global.tokens.shape()[0]);
  const std::size_t rows = global.tokens.shape()[0] / std::size_t(size_);
  const std::size_t T = global.tokens.shape()[1];
  const std::size_t first = std::size_t(rank_) * rows * T;
  tasks::Batch b{Indices::from_shape({rows, T}), Indices::from_shape({rows, T})};
  std::copy_n(global.tokens.data() + first, rows * T, b.tokens.data());
  std::copy_n(global.targets.data() + first, rows * T, b.targets.data());
  return b;
}

#ifdef TAPEGRAD_WITH_MPI

bool data_parallel_available() { return true; }

namespace {
// A failed MPI call has already printed its own message under MPI_ERRORS_ARE_FATAL (the
// default), and brought the job down; this covers an error handler that returns.
void checked(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    std::fprintf(stderr, "train_tiny_transformer: --data-parallel: %s failed (MPI error %d)\n",
                 what, rc);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

// TAPEGRAD_DATA_PARALLEL_EXIT_AT=rank:step makes that rank leave at that step's all-reduce
// without a word, as a killed process would: how the tests show that the other ranks then
// exit with an error instead of waiting for it forever.
void exit_if_told(int rank, std::size_t step) {
  static const char* told = std::getenv("TAPEGRAD_DATA_PARALLEL_EXIT_AT");
  int r = -1;
  std::size_t s = 0;
  if (told && std::sscanf(told, "%d:%zu", &r, &s) == 2 && r == rank && s == step) std::_Exit(3);
}
}  // namespace

std::unique_ptr<DataParallel> DataParallel::start(int& argc, char**& argv) {
  int initialised = 0;
  MPI_Initialized(&initialised);
  if (!initialised) checked(MPI_Init(&argc, &argv), "MPI_Init");
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::unique_ptr<DataParallel>(new DataParallel(rank, size));
}

DataParallel::~DataParallel() {
  int finalised = 0;
  MPI_Finalized(&finalised);
  if (!finalised) MPI_Finalize();
}

void DataParallel::check_same_parameters(const std::vector<Tensor<float>>& params,
                                         const char* when) const {
  const std::uint64_t mine = parameter_checksum(params);
  std::vector<std::uint64_t> all(std::size_t(size_), 0);
  checked(MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD),
          "MPI_Allgather");
  for (int r = 1; r < size_; ++r)
    if (all[std::size_t(r)] != all[0])
      throw DataParallelError(fmt::format(
          "--data-parallel: the parameters differ between ranks {}: rank 0 has checksum {:016x}, "
          "rank {} {:016x} (every rank must build the same model from the same seed or "
          "checkpoint)", when, all[0], r, all[std::size_t(r)]));
}

// One flat buffer [targets_r * grad_r of every parameter..., targets_r * loss_r, targets_r],
// summed over the ranks in one call, then divided by the summed target count.
double DataParallel::all_reduce_gradients(const std::vector<Tensor<float>>& params,
                                          double loss, std::size_t targets) {
  std::size_t n = 0;
  for (const Tensor<float>& p : params) n += p.size();
  buffer_.resize(n + 2);
  const float weight = float(targets);
  float* at = buffer_.data();
  for (const Tensor<float>& p : params) {
    if (!p.has_grad())
      throw DataParallelError("--data-parallel: a parameter of shape " + p.shape_string() +
                              " has no gradient after backward");
    const float* g = p.grad().data();
    for (std::size_t i = 0; i < p.size(); ++i) *at++ = weight * g[i];
  }
  buffer_[n] = weight * float(loss);
  buffer_[n + 1] = weight;
  exit_if_told(rank_, ++steps_);
  const auto started = std::chrono::steady_clock::now();
  checked(MPI_Allreduce(MPI_IN_PLACE, buffer_.data(), int(buffer_.size()), MPI_FLOAT, MPI_SUM,
                        MPI_COMM_WORLD), "MPI_Allreduce");
  all_reduce_seconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const float total = buffer_[n + 1];
  at = buffer_.data();
  for (Tensor<float> p : params) {  // a handle: its gradient is the parameter's
    float* g = p.grad().data();
    for (std::size_t i = 0; i < p.size(); ++i) g[i] = *at++ / total;
  }
  return double(buffer_[n]) / double(total);
}

void DataParallel::abort(int code) const {
  std::fflush(stdout);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

#else  // built without MPI: the interface stays, start() says why it cannot run

bool data_parallel_available() { return false; }

std::unique_ptr<DataParallel> DataParallel::start(int&, char**&) {
  throw DataParallelError(
      "--data-parallel: this build has no MPI (install libopenmpi-dev and openmpi-bin, or "
      "scripts/install-deps.sh --test, then configure again)");
}
DataParallel::~DataParallel() = default;
void DataParallel::check_same_parameters(const std::vector<Tensor<float>>&, const char*) const {}
double DataParallel::all_reduce_gradients(const std::vector<Tensor<float>>&, double loss,
                                          std::size_t) {
  return loss;
}
void DataParallel::abort(int code) const { std::_Exit(code); }

#endif

}  // namespace tapegrad::train
