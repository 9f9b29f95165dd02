// NCCL for the gradient all-reduce of GPU models (every GPU driver, LibTorch on CUDA too): the
// communicator is bootstrapped over the case's ranks (rank 0's unique id is broadcast through the
// harness's RankGroup), and each reduction is queued on a stream, so that it orders after the work
// that computed the gradients without any host synchronisation.
//
// The communicator is non-blocking (ncclConfig_t::blocking = 0), and nothing here waits for NCCL
// in a call that cannot return: its set-up, its calls and the completion of its reductions are
// polled, together with ncclCommGetAsyncError. When NCCL reports an error (a peer lost, a network
// failure) or the case's deadline passes, the communicator is aborted, which ends its kernels so
// that the streams drain, and the caller gets the error (or Timeout): the case is recorded and the
// sweep goes on with a new communicator.
#pragma once

#include <nccl.h>

#include <cstddef>
#include <exception>
#include <string>

#include <cuda_runtime.h>

#include "drivers/driver.h"

namespace dlscale::gpu {

class NcclCommunicator {
 public:
  /// Collective over `ranks`; each rank passes the GPU it trains on. Throws Timeout when the
  /// ranks have not all joined by `deadline`.
  NcclCommunicator(const RankGroup& ranks, int device, Deadline deadline = Deadline::max());
  /// Finalises and destroys a sound communicator (polled, for at most kFinaliseSeconds); aborts one
  /// that failed or did not finalise.
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  /// In place over the ranks: the sum (kSum) or the mean (kAverage; NCCL premultiplies each
  /// contribution by 1/P, exact when P is a power of two), queued on `stream`. Queuing may wait
  /// for the peers (NCCL connects them at a communicator's first collective): past `deadline` it
  /// abandons the communicator and throws Timeout. Once abandoned, every call throws again what
  /// abandoned it.
  enum class Op { kSum, kAverage };
  void allreduce(float* data, size_t count, Op op, cudaStream_t stream, Deadline deadline = Deadline::max());
  /// Returns once `event` (recorded after reductions of this communicator) has completed. Until
  /// then polls the event and NCCL's asynchronous error, yielding the core between polls; on an
  /// error, or when `deadline` passes, abandons the communicator and throws the error or Timeout.
  void wait(cudaEvent_t event, Deadline deadline);
  int ranks() const { return ranks_; }

  /// How long the destructor lets ncclCommFinalize flush before it aborts instead.
  static constexpr double kFinaliseSeconds = 10;

 private:
  /// Polls until the NCCL call in flight is done (non-blocking NCCL returns ncclInProgress from
  /// it), abandoning the communicator on an error or past `deadline`; `doing` says what it was
  /// doing, for the message.
  void settle(const char* doing, Deadline deadline);
  /// Aborts the communicator and throws: Timeout when `timed_out`, else NCCL's error `state`.
  [[noreturn]] void abandon(const std::string& doing, bool timed_out, ncclResult_t state);

  ncclComm_t comm_ = nullptr;     ///< nullptr once abandoned
  std::exception_ptr abandoned_;  ///< why it was: every later call throws it again
  int ranks_ = 1;
};

/// NCCL's version as "2.28.9".
const char* nccl_version();

}  // namespace dlscale::gpu
