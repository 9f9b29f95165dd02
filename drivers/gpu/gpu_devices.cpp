#include "drivers/gpu/gpu_devices.h"

#include <cuda_runtime.h>

#include <fmt/format.h>

#include "drivers/gpu/cuda_check.h"

namespace dlscale::gpu {

int visible_gpu_count(std::string* why) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    if (why != nullptr) *why = fmt::format("cudaGetDeviceCount: {}", cudaGetErrorString(status));
    return 0;
  }
  if (count == 0 && why != nullptr) *why = "cudaGetDeviceCount found no GPU";
  return count;
}

GpuInfo gpu_info(int index) {
  cudaDeviceProp prop{};
  DLSCALE_CHECK_CUDA(cudaGetDeviceProperties(&prop, index));
  GpuInfo info;
  info.index = index;
  info.name = prop.name;
  info.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  const auto* u = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
  info.uuid = fmt::format(
      "GPU-{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}", u[0],
      u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
  char bus[32] = {0};
  DLSCALE_CHECK_CUDA(cudaDeviceGetPCIBusId(bus, sizeof bus, index));
  info.pci_bus_id = bus;
  return info;
}

std::string GpuInfo::describe() const {
  return fmt::format("cuda:{} {} {} bus {} ({:.1f} GiB)", index, name, uuid, pci_bus_id,
                     static_cast<double>(memory_bytes) / (1024.0 * 1024 * 1024));
}

}  // namespace dlscale::gpu
