// RAII owners for everything the CUDA driver creates: device memory (counted, for the memory
// peak the results file records), streams, events, and cuBLAS/cuDNN handles and descriptors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "drivers/gpu/cuda_check.h"

namespace dlscale::gpu {

/// The device bytes a model holds through its own allocations, and their high-water mark.
/// Library-internal memory (the CUDA context, cuDNN's kernels) is not counted.
struct MemoryTracker {
  int64_t current = 0, peak = 0;
  void allocated(int64_t bytes) {
    current += bytes;
    if (current > peak) peak = current;
  }
  void freed(int64_t bytes) { current -= bytes; }
};

/// One cudaMalloc'ed block, zero-filled, counted against a tracker.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t bytes, MemoryTracker* tracker) : bytes_(bytes), tracker_(tracker) {
    if (bytes == 0) return;
    DLSCALE_CHECK_CUDA(cudaMalloc(&ptr_, bytes));
    // Zeroed so that padding in the parameter buffer stays zero and no algorithm search ever
    // reads garbage (NaNs or denormals would skew its timings).
    // cudaMemset may return before it ran, on the legacy default stream, which the models'
    // non-blocking streams do not wait for: wait here (buffers are only made during set-up).
    cudaError_t status = cudaMemset(ptr_, 0, bytes);
    if (status == cudaSuccess) status = cudaDeviceSynchronize();
    if (status != cudaSuccess) cudaFree(ptr_);
    DLSCALE_CHECK_CUDA(status);
    if (tracker_ != nullptr) tracker_->allocated(static_cast<int64_t>(bytes));
  }
  ~DeviceBuffer() { release(); }
  DeviceBuffer(DeviceBuffer&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)), tracker_(o.tracker_) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      bytes_ = std::exchange(o.bytes_, 0);
      tracker_ = o.tracker_;
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  template <class T = float>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void release() {
    if (ptr_ == nullptr) return;
    cudaFree(ptr_);  // cannot fail usefully in a destructor; a broken context shows elsewhere
    if (tracker_ != nullptr) tracker_->freed(static_cast<int64_t>(bytes_));
    ptr_ = nullptr;
  }
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
  MemoryTracker* tracker_ = nullptr;
};

/// Sole owner of a library handle or descriptor created by `Create(&h)` and released by `Destroy(h)`.
template <class T, auto Create, auto Destroy>
class Owned {
 public:
  Owned() { DLSCALE_CHECK_CUDA(Create(&h_)); }
  ~Owned() {
    if (h_ != nullptr) (void)Destroy(h_);
  }
  Owned(Owned&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Owned& operator=(Owned&& o) noexcept {
    std::swap(h_, o.h_);
    return *this;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  T get() const { return h_; }
  operator T() const { return h_; }  // NOLINT: pass straight to the C API

 private:
  T h_ = nullptr;
};

inline cudaError_t create_nonblocking_stream(cudaStream_t* s) {
  // Non-blocking: the legacy default stream (which LibTorch or a stray cudaMemcpy may use)
  // does not serialise against the timed work.
  return cudaStreamCreateWithFlags(s, cudaStreamNonBlocking);
}

/// cudaEventCreate is overloaded in C++, so it cannot be a template argument itself.
inline cudaError_t create_timing_event(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }

/// An event only for ordering streams and polling completion: no timestamp, so cheaper to record.
inline cudaError_t create_sync_event(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDisableTiming); }

using Stream = Owned<cudaStream_t, create_nonblocking_stream, cudaStreamDestroy>;
using Event = Owned<cudaEvent_t, create_timing_event, cudaEventDestroy>;
using SyncEvent = Owned<cudaEvent_t, create_sync_event, cudaEventDestroy>;
using CublasHandle = Owned<cublasHandle_t, cublasCreate_v2, cublasDestroy_v2>;
using CudnnHandle = Owned<cudnnHandle_t, cudnnCreate, cudnnDestroy>;
using TensorDesc = Owned<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor, cudnnDestroyTensorDescriptor>;
using FilterDesc = Owned<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor, cudnnDestroyFilterDescriptor>;
using ConvDesc =
    Owned<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor, cudnnDestroyConvolutionDescriptor>;
using PoolDesc = Owned<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor, cudnnDestroyPoolingDescriptor>;
using ActivationDesc =
    Owned<cudnnActivationDescriptor_t, cudnnCreateActivationDescriptor, cudnnDestroyActivationDescriptor>;
using DropoutDesc = Owned<cudnnDropoutDescriptor_t, cudnnCreateDropoutDescriptor, cudnnDestroyDropoutDescriptor>;
using RnnDesc = Owned<cudnnRNNDescriptor_t, cudnnCreateRNNDescriptor, cudnnDestroyRNNDescriptor>;
using RnnDataDesc = Owned<cudnnRNNDataDescriptor_t, cudnnCreateRNNDataDescriptor, cudnnDestroyRNNDataDescriptor>;

}  // namespace dlscale::gpu
