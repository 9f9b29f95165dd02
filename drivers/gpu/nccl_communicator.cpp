#include "drivers/gpu/nccl_communicator.h"

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "drivers/gpu/cuda_check.h"

namespace dlscale::gpu {

namespace {

using Clock = std::chrono::steady_clock;

/// NCCL's message for `state`, with its last error text where it has one.
std::string describe(ncclResult_t state) {
  std::string message = ncclGetErrorString(state);
  if (const char* last = ncclGetLastError(nullptr); last != nullptr && *last != '\0') {
    message += fmt::format(" ({})", last);
  }
  return message;
}

}  // namespace

NcclCommunicator::NcclCommunicator(const RankGroup& ranks, int device, Deadline deadline) : ranks_(ranks.size()) {
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
  DLSCALE_CHECK_CUDA(cudaSetDevice(device));  // NCCL binds the communicator to the current GPU
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t started = ncclCommInitRankConfig(&comm_, ranks_, root.id, rank, &config);
  if (started != ncclSuccess && started != ncclInProgress) {
    if (comm_ != nullptr) (void)ncclCommAbort(comm_);
    comm_ = nullptr;
    DLSCALE_CHECK_CUDA(started);  // throws, naming the call
  }
  settle("setting up the communicator (every rank of the case joining)", deadline);
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ == nullptr) return;
  // Finalise flushes what is in flight; polled, so that a peer that failed cannot hold this
  // process here. What does not finalise in time is aborted.
  const ncclResult_t finalising = ncclCommFinalize(comm_);
  bool sound = finalising == ncclSuccess || finalising == ncclInProgress;
  const Clock::time_point until =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kFinaliseSeconds));
  for (ncclResult_t state = ncclInProgress; sound && state != ncclSuccess;) {
    if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess) state = ncclInternalError;
    sound = state == ncclSuccess || (state == ncclInProgress && Clock::now() < until);
    if (state == ncclInProgress) std::this_thread::yield();
  }
  (void)(sound ? ncclCommDestroy(comm_) : ncclCommAbort(comm_));
}

void NcclCommunicator::allreduce(float* data, size_t count, Op op, cudaStream_t stream, Deadline deadline) {
  if (comm_ == nullptr) std::rethrow_exception(abandoned_);
  const ncclResult_t queued =
      ncclAllReduce(data, data, count, ncclFloat32, op == Op::kSum ? ncclSum : ncclAvg, comm_, stream);
  if (queued != ncclSuccess && queued != ncclInProgress) abandon("queuing ncclAllReduce", false, queued);
  // Until the call has settled NCCL forbids further calls on the communicator; a first
  // collective also connects the peers, so a peer that never comes holds it here.
  settle("queuing ncclAllReduce", deadline);
}

void NcclCommunicator::wait(cudaEvent_t event, Deadline deadline) {
  if (comm_ == nullptr) std::rethrow_exception(abandoned_);
  for (;;) {
    const cudaError_t done = cudaEventQuery(event);
    if (done == cudaSuccess) return;
    if (done != cudaErrorNotReady) DLSCALE_CHECK_CUDA(done);  // throws
    ncclResult_t state = ncclSuccess;
    DLSCALE_CHECK_CUDA(ncclCommGetAsyncError(comm_, &state));
    if (state != ncclSuccess && state != ncclInProgress) abandon("waiting for the all-reduce", false, state);
    if (Clock::now() >= deadline) abandon("waiting for the all-reduce", true, state);
    std::this_thread::yield();
  }
}

void NcclCommunicator::settle(const char* doing, Deadline deadline) {
  for (;;) {
    ncclResult_t state = ncclSuccess;
    DLSCALE_CHECK_CUDA(ncclCommGetAsyncError(comm_, &state));
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) abandon(doing, false, state);
    if (Clock::now() >= deadline) abandon(doing, true, state);
    std::this_thread::yield();
  }
}

void NcclCommunicator::abandon(const std::string& doing, bool timed_out, ncclResult_t state) {
  (void)ncclCommAbort(comm_);  // ends the communicator's kernels: the streams they hold drain
  comm_ = nullptr;
  try {
    if (timed_out) {
      throw Timeout(fmt::format(
          "NCCL: still {} when the case's deadline (--case-timeout) passed; the communicator was aborted", doing));
    }
    throw std::runtime_error(
        fmt::format("NCCL error while {}: {}; the communicator was aborted", doing, describe(state)));
  } catch (...) {
    abandoned_ = std::current_exception();
    throw;
  }
}

const char* nccl_version() {
  static const std::string text = [] {
    int v = 0;
    if (ncclGetVersion(&v) != ncclSuccess) return std::string("unknown");
    return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
  }();
  return text.c_str();
}

}  // namespace dlscale::gpu
