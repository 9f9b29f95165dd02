// The parts of a GPU training step that every CUDA driver (cuda, LibTorch on CUDA) hands to the
// harness: a StepTimer of CUDA events on the model's stream, and a GradientReducer that averages
// with NCCL, ordered by that stream (in buckets on a side stream, with --bucket-mb), so that a
// timed step holds no host synchronisation.
#pragma once

#include <functional>
#include <memory>

#include "drivers/driver.h"

namespace dlscale::gpu {

/// CUDA events recorded on `stream` (a cudaStream_t; nullptr is the legacy default stream) of
/// GPU `device`.
std::unique_ptr<StepTimer> make_event_timer(void* stream, int device);

/// NCCL over `ranks` on GPU `device`, created here (collective; Timeout when the ranks have not
/// all joined by `deadline`), before any model takes the GPU's memory. `stream_of` gives the
/// stream of a model bound to it (the driver knows its models).
std::unique_ptr<GradientReducer> make_nccl_reducer(const RankGroup& ranks, int device, Deadline deadline,
                                                   std::function<void*(const Model&)> stream_of);

}  // namespace dlscale::gpu
