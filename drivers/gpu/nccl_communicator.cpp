#include "drivers/gpu/nccl_communicator.h"

#include <string>

#include <fmt/format.h>

#include "drivers/gpu/cuda_check.h"

namespace dlscale::cuda {

NcclCommunicator::NcclCommunicator(const RankGroup& ranks, int device) : ranks_(ranks.size()) {
  const int rank = ranks.rank();
  // The id travels with rank 0's verdict, so that a failure there stops every rank here instead
  // of leaving them waiting in the broadcast or in NCCL.
  struct {
    ncclUniqueId id;
    int ok;
  } root{};
  if (rank == 0) root.ok = ncclGetUniqueId(&root.id) == ncclSuccess ? 1 : 0;
  ranks.broadcast(&root, sizeof root, 0);
  if (root.ok == 0) throw std::runtime_error("NCCL error: ncclGetUniqueId failed on rank 0");
  const ncclUniqueId& id = root.id;
  DLSCALE_CHECK_CUDA(cudaSetDevice(device));  // NCCL binds the communicator to the current GPU
  DLSCALE_CHECK_CUDA(ncclCommInitRank(&comm_, ranks_, id, rank));
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ != nullptr) (void)ncclCommDestroy(comm_);
}

void NcclCommunicator::allreduce(float* data, size_t count, Op op, cudaStream_t stream) {
  DLSCALE_CHECK_CUDA(ncclAllReduce(data, data, count, ncclFloat32, op == Op::kSum ? ncclSum : ncclAvg, comm_, stream));
}

const char* nccl_version() {
  static const std::string text = [] {
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess) return std::string("unknown");
    return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
  }();
  return text.c_str();
}

}  // namespace dlscale::cuda
