#include "drivers/gpu/cuda_check.h"

#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "drivers/driver.h"

namespace dlscale::gpu {

namespace {

[[noreturn]] void fail(bool out_of_memory, const std::string& library, const std::string& message, const char* call,
                       const char* file, int line) {
  const std::string text = fmt::format("{} error: {} in {} ({}:{})", library, message, call, file, line);
  if (out_of_memory) throw OutOfMemory(text);
  throw std::runtime_error(text);
}

}  // namespace

void check(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  // Clears the error so that later calls do not report it again (allocation failures are not
  // sticky: the context stays usable and the sweep can go on).
  (void)cudaGetLastError();
  fail(status == cudaErrorMemoryAllocation, "CUDA", cudaGetErrorString(status), call, file, line);
}

void check(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  fail(status == CUBLAS_STATUS_ALLOC_FAILED, "cuBLAS", cublasGetStatusString(status), call, file, line);
}

void check(cudnnStatus_t status, const char* call, const char* file, int line) {
  if (status == CUDNN_STATUS_SUCCESS) return;
  char detail[512] = {0};
  cudnnGetLastErrorString(detail, sizeof detail);
  std::string message = cudnnGetErrorString(status);
  if (detail[0] != '\0') message += fmt::format(" ({})", detail);
  fail(status == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED ||
           status == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED,
       "cuDNN", message, call, file, line);
}

void check(ncclResult_t status, const char* call, const char* file, int line) {
  if (status == ncclSuccess) return;
  std::string message = ncclGetErrorString(status);
  if (const char* last = ncclGetLastError(nullptr); last != nullptr && *last != '\0')
    message += fmt::format(" ({})", last);
  fail(false, "NCCL", message, call, file, line);
}

}  // namespace dlscale::gpu
