// The parts of a GPU training step that every CUDA driver (cuda, LibTorch on CUDA) hands to the
// harness: a StepTimer of CUDA events on the model's stream, and a GradientReducer that averages
// with NCCL on that stream, so that a timed step holds no host synchronisation.
#pragma once

#include <functional>
#include <memory>

#include "drivers/driver.h"

namespace dlscale::cuda {

/// CUDA events recorded on `stream` (a cudaStream_t; nullptr is the legacy default stream) of
/// GPU `device`.
std::unique_ptr<StepTimer> make_event_timer(void* stream, int device);

/// NCCL over `ranks` on GPU `device`, created here (collective), before any model takes the GPU's
/// memory. `stream_of` gives the stream of a model bound to it (the driver knows its models).
std::unique_ptr<GradientReducer> make_nccl_reducer(const RankGroup& ranks, int device,
                                                   std::function<void*(const Model&)> stream_of);

}  // namespace dlscale::cuda
