// Which GPU a rank trains on, how that is recorded, and what the harness needs to know about
// GPUs, all asked of the drivers (drivers/driver.h): the harness itself knows no GPU library.
#pragma once

#include <string>
#include <vector>

#include "drivers/driver.h"
#include "suite/comm/mpi_context.h"

namespace dlscale {

/// The GPU of a rank with node-local rank `local_rank` when `visible` GPUs are visible: device 0
/// when the launcher left exactly one (CUDA_VISIBLE_DEVICES with one entry, as `srun
/// --gpus-per-task=1` does), else the node-local rank modulo the GPUs visible (more ranks than
/// GPUs share them; a warning says so).
int gpu_index_for(int local_rank, int visible);

/// GPUs this process sees (CUDA_VISIBLE_DEVICES applied): the most any compiled driver sees; 0,
/// with the first driver's reason in `why`, when none does.
int visible_gpus(const Registry& drivers, std::string* why = nullptr);

/// /system/ranks' device entry for a rank that trains on GPU `index` ("cuda:0 NVIDIA H100 …"),
/// as the first driver that sees GPUs describes it, or why there is none.
std::string describe_gpu(const Registry& drivers, int index);

/// One warning per pair of ranks on one host that train on the same GPU.
std::vector<std::string> shared_gpu_warnings(const std::vector<RankInfo>& table);

/// Whether two ranks of `comm` on one host would train on the same GPU (NCCL refuses that), from
/// each rank's host and `device` description; collective, the same answer on every rank.
bool gpus_shared(MPI_Comm comm, const std::string& host, const std::string& device);

}  // namespace dlscale
