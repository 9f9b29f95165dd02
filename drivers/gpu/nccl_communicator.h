// NCCL for the gradient all-reduce of GPU models (every GPU driver, LibTorch on CUDA too): the
// communicator is bootstrapped over the case's ranks (rank 0's unique id is broadcast through the
// harness's RankGroup), and the reduction is queued on the model's own stream, so it orders after
// backward and before the update without any host synchronisation.
#pragma once

#include <nccl.h>

#include <cstddef>

#include <cuda_runtime.h>

#include "drivers/driver.h"

namespace dlscale::cuda {

class NcclCommunicator {
 public:
  /// Collective over `ranks`; each rank passes the GPU it trains on.
  NcclCommunicator(const RankGroup& ranks, int device);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  /// In place over the ranks: the sum (kSum) or the mean (kAverage; NCCL premultiplies each
  /// contribution by 1/P, exact when P is a power of two), queued on `stream`.
  enum class Op { kSum, kAverage };
  void allreduce(float* data, size_t count, Op op, cudaStream_t stream);
  int ranks() const { return ranks_; }

 private:
  ncclComm_t comm_ = nullptr;
  int ranks_ = 1;
};

/// NCCL's version as "2.28.9".
const char* nccl_version();

}  // namespace dlscale::cuda
