#include "drivers/gpu/event_timer.h"

namespace dlscale::gpu {

EventTimer::EventTimer(void* stream, int marks) : stream_(static_cast<cudaStream_t>(stream)), events_(marks) {}

void EventTimer::record(int i) { DLSCALE_CHECK_CUDA(cudaEventRecord(events_.at(static_cast<size_t>(i)), stream_)); }

double EventTimer::seconds(int from, int to) {
  DLSCALE_CHECK_CUDA(cudaEventSynchronize(events_.at(static_cast<size_t>(to))));
  float ms = 0;
  DLSCALE_CHECK_CUDA(
      cudaEventElapsedTime(&ms, events_.at(static_cast<size_t>(from)), events_.at(static_cast<size_t>(to))));
  return static_cast<double>(ms) * 1e-3;
}

}  // namespace dlscale::gpu
