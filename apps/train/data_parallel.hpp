#pragma once
// Data-parallel training over MPI: the same model on every rank, each rank its own rows of
// every global batch, the gradients summed across the ranks after backward.
//
//   mpirun -np N train_tiny_transformer --data-parallel --batch B ...   (N divides B)
//
// Every rank draws the same global batch from the same data stream and keeps rows
// [rank * B/N, (rank + 1) * B/N), so the run sees exactly the batches a single process with
// --batch B sees. After backward each rank holds the gradient of the mean loss over its own
// targets; one all-reduce of one flat buffer per step turns that into the gradient of the
// mean over the global batch's targets (weighted by each rank's target count), which is
// what one process would have computed, up to the order of the additions. Clipping then
// sees the same global norm on every rank, and every rank takes the same optimiser step.
//
// MPI stays in data_parallel.cpp: a build without MPI keeps this interface, and start()
// then throws DataParallelError saying so.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "autograd/tensor.hpp"
#include "tasks/tasks.hpp"

namespace tapegrad::train {

// Misuse or a disagreement between ranks: the message names what differs.
class DataParallelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Whether this build can run data-parallel (it found MPI).
bool data_parallel_available();

// The launcher's variable that shows this process is one of several an MPI launcher
// started ("OMPI_COMM_WORLD_SIZE=2"; Open MPI, MPICH/Hydra's PMI_SIZE, PMIx's PMIX_RANK),
// empty when it is not: without --data-parallel each of them would run the whole job into
// the same --out.
std::string mpi_launch_variable();

class DataParallel {
 public:
  // Initialises MPI (once per process). Throws DataParallelError if the build has no MPI.
  static std::unique_ptr<DataParallel> start(int& argc, char**& argv);
  ~DataParallel();  // finalises MPI
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool is_root() const { return rank_ == 0; }

  // Throws DataParallelError unless the global batch splits evenly over the ranks.
  void check_batch(std::size_t global_batch) const;
  // This rank's rows of a global batch (B, T): rows [rank * B/N, (rank + 1) * B/N).
  tasks::Batch shard(const tasks::Batch& global) const;

  // A checksum of every parameter's bits, compared across the ranks; throws
  // DataParallelError naming `when` and the differing checksums if any rank disagrees.
  void check_same_parameters(const std::vector<Tensor<float>>& params, const char* when) const;

  // After backward: each parameter's gradient (this rank's mean over its `targets` loss
  // positions) becomes the global batch's, and the returned loss the global mean:
  // sum_r targets_r * x_r / sum_r targets_r, all in one MPI_Allreduce.
  double all_reduce_gradients(const std::vector<Tensor<float>>& params, double loss,
                              std::size_t targets);
  double all_reduce_seconds() const { return all_reduce_seconds_; }
  std::size_t all_reduce_bytes() const { return buffer_.size() * sizeof(float); }

  // Brings every rank down with `code` (MPI_Abort): an error on one rank must not leave the
  // others waiting in the next collective.
  [[noreturn]] void abort(int code) const;

 private:
  DataParallel(int rank, int size) : rank_(rank), size_(size) {}
  int rank_ = 0, size_ = 1;
  std::vector<float> buffer_;
  double all_reduce_seconds_ = 0;
  std::size_t steps_ = 0;
};

// The number of positions of `b` whose target carries loss (not tasks::kIgnore).
std::size_t loss_targets(const tasks::Batch& b);

// FNV-1a over the bytes of every parameter's value, in order.
std::uint64_t parameter_checksum(const std::vector<Tensor<float>>& params);

}  // namespace tapegrad::train
