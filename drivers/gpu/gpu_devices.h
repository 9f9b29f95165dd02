// What the harness asks about GPUs: how many are visible, and which one a rank uses (name, UUID,
// PCI bus id) for /system/ranks and for spotting ranks that share a GPU.
#pragma once

#include <cstdint>
#include <string>

namespace dlscale::gpu {

/// The number of visible GPUs; 0 with the reason in `why` when there are none or the CUDA
/// driver cannot be used.
int visible_gpu_count(std::string* why);

struct GpuInfo {
  int index = 0;
  std::string name, uuid, pci_bus_id;
  int64_t memory_bytes = 0;
  /// "cuda:0 NVIDIA H100 80GB HBM3 GPU-5f1c… bus 0000:1b:00.0 (79.1 GiB)".
  std::string describe() const;
};

GpuInfo gpu_info(int index);

}  // namespace dlscale::gpu
