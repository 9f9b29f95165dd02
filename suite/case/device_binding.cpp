#include "suite/case/device_binding.h"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>

#include "suite/errors.h"

namespace dlscale {

int gpu_index_for(int local_rank, int visible) {
  const char* only = std::getenv("CUDA_VISIBLE_DEVICES");
  if (only != nullptr && *only != '\0' && std::string(only).find(',') == std::string::npos) return 0;
  return visible > 0 ? local_rank % visible : local_rank;
}

int visible_gpus(const Registry& drivers, std::string* why) {
  int most = 0;
  std::string reason = "no driver of this build runs on GPUs";
  bool gpu_driver = false;
  for (const auto& d : drivers.all()) {
    std::string mine;
    most = std::max(most, d->device_count(DeviceType::kCuda, &mine));
    // The reason of a GPU driver (cuda's "cudaGetDeviceCount: …") says more than a CPU one's.
    if (!gpu_driver && d->default_device() == DeviceType::kCuda) {
      gpu_driver = true;
      reason = mine;
    }
  }
  if (why != nullptr) *why = most > 0 ? std::string() : reason;
  return most;
}

std::string describe_gpu(const Registry& drivers, int index) {
  std::string why;
  for (const auto& d : drivers.all()) {
    if (d->device_count(DeviceType::kCuda, nullptr) > index) return d->describe_device(DeviceType::kCuda, index);
  }
  visible_gpus(drivers, &why);
  return fmt::format("cuda:{} (not available: {})", index, why.empty() ? "no such GPU" : why);
}

std::vector<std::string> shared_gpu_warnings(const std::vector<RankInfo>& table) {
  std::vector<std::string> warnings;
  for (size_t a = 0; a < table.size(); ++a) {
    if (table[a].device.rfind("cuda:", 0) != 0) continue;
    for (size_t b = a + 1; b < table.size(); ++b) {
      if (table[a].host == table[b].host && table[a].device == table[b].device) {
        warnings.push_back(
            fmt::format("ranks {} and {} on {} share GPU {}: their timings interfere (and NCCL "
                        "refuses two ranks on one GPU)",
                        table[a].rank, table[b].rank, table[a].host, table[a].device));
      }
    }
  }
  return warnings;
}

bool gpus_shared(MPI_Comm comm, const std::string& host, const std::string& device) {
  const std::vector<std::string> all = gather_strings(comm, host + " " + device);
  int shared = 0;
  for (size_t a = 0; a < all.size() && shared == 0; ++a) {
    for (size_t b = a + 1; b < all.size(); ++b) shared |= all[a] == all[b] ? 1 : 0;
  }
  return allreduce_max(comm, shared) != 0;  // rank 0 found it; everyone learns it
}

}  // namespace dlscale
