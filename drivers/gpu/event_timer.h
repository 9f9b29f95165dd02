// Times GPU work where it runs: CUDA events recorded on a stream, read once the last one has
// completed. The harness uses it for every GPU model instead of the host clock.
#pragma once

#include <vector>

#include "drivers/gpu/cuda_resources.h"

namespace dlscale::gpu {

class EventTimer {
 public:
  /// `marks` events on `stream` (a cudaStream_t; nullptr is the legacy default stream).
  EventTimer(void* stream, int marks);
  /// Records mark `i` after all work queued on the stream so far.
  void record(int i);
  /// Seconds from mark `from` to mark `to`, waiting for `to` to complete.
  double seconds(int from, int to);

 private:
  cudaStream_t stream_;
  std::vector<Event> events_;
};

}  // namespace dlscale::gpu
