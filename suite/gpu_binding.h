// Which GPU a rank trains on, how that is recorded, and what the harness runs on it besides the
// model: CUDA-event timing and the NCCL gradient all-reduce. Compiles without CUDA (then there
// is no GPU to bind, and GPU cases never get past validation).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "drivers/driver.h"
#include "suite/allreduce_bench.h"
#include "suite/mpi_context.h"

namespace dlscale {

/// The GPU of a rank with node-local rank `local_rank`: device 0 when the launcher left exactly
/// one visible (CUDA_VISIBLE_DEVICES with one entry, as `srun --gpus-per-task=1` does), else the
/// node-local rank, modulo the GPUs visible (more ranks than GPUs share them; a warning says so).
int gpu_index_for(int local_rank);

/// GPUs this process sees (CUDA_VISIBLE_DEVICES applied); 0 without CUDA, with `why` saying why.
int visible_gpus(std::string* why = nullptr);

/// /system/ranks' device entry for a rank that trains on GPU `index` ("cuda:0 NVIDIA H100 …"),
/// or why it has none.
std::string describe_gpu(int index);

/// One warning per pair of ranks on one host that train on the same GPU.
std::vector<std::string> shared_gpu_warnings(const std::vector<RankInfo>& table);

/// Whether two ranks of `comm` on one host would train on the same GPU (NCCL refuses that);
/// collective, the same answer on every rank.
bool gpus_shared(MPI_Comm comm, const std::string& host, int device);

/// What a training step on a GPU model needs from the harness: CUDA-event timing on the model's
/// stream, and the NCCL communicator of the case's ranks.
class GpuStep {
 public:
  virtual ~GpuStep() = default;
  /// Times and reduces on `model`'s stream from now on.
  virtual void bind(const Model& model) = 0;
  /// Records timing mark `i` on the model's stream.
  virtual void mark(int i) = 0;
  /// Seconds between two marks, once the later one has completed.
  virtual double seconds(int from, int to) = 0;
  /// Averages the gradient buffer over the case's ranks (NCCL, on the model's stream); a no-op
  /// on one rank.
  virtual void allreduce(const GradBuffer& grads) = 0;
  /// The all-reduce microbenchmark's transport over the same communicator (more than one rank).
  virtual std::unique_ptr<AllreduceTransport> transport() = 0;
};

/// Collective over `comm` when it has more than one rank: the NCCL communicator is created here,
/// before the model takes the GPU's memory. Throws std::runtime_error when this build has no CUDA.
std::unique_ptr<GpuStep> make_gpu_step(MPI_Comm comm, int device);

/// GPU memory summed with NCCL on its own stream, for `dlscale allreduce --backend nccl`;
/// collective over `comm`. Throws std::runtime_error when this build has no CUDA.
std::unique_ptr<AllreduceTransport> make_nccl_transport(MPI_Comm comm, int device);

}  // namespace dlscale
