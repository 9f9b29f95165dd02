// Checks for every CUDA runtime, cuBLAS, cuDNN and NCCL call: a failed call throws, naming the
// call, the library's message and the place. Allocation failures throw OutOfMemory, so that the
// harness records the case as `oom` and a batch sweep goes on.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

namespace dlscale::gpu {

void check(cudaError_t status, const char* call, const char* file, int line);
void check(cublasStatus_t status, const char* call, const char* file, int line);
void check(cudnnStatus_t status, const char* call, const char* file, int line);
void check(ncclResult_t status, const char* call, const char* file, int line);

}  // namespace dlscale::gpu

#define DLSCALE_CHECK_CUDA(call) ::dlscale::gpu::check((call), #call, __FILE__, __LINE__)
