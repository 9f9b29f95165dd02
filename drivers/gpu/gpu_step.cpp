#include "drivers/gpu/gpu_step.h"

#include <stdexcept>
#include <utility>

#include "drivers/gpu/cuda_resources.h"
#include "drivers/gpu/event_timer.h"
#include "drivers/gpu/nccl_communicator.h"

namespace dlscale::cuda {

namespace {

/// Makes `device` current and returns it: events and streams belong to the GPU current when
/// they are made.
int select(int device) {
  DLSCALE_CHECK_CUDA(cudaSetDevice(device));
  return device;
}

class CudaEventStepTimer final : public StepTimer {
 public:
  // Marks 0..4: the step's start, three phase boundaries, its end.
  CudaEventStepTimer(void* stream, int device) : device_(select(device)), timer_(stream, 5) {}
  void mark(int i) override { timer_.record(i); }
  double seconds(int from, int to) override { return timer_.seconds(from, to); }

 private:
  int device_;  // made current before the events below
  EventTimer timer_;
};

/// A buffer on the GPU reduced with NCCL; each load copies the values in, each reduce waits for
/// NCCL to finish, as a training step's all-reduce has finished when the update runs.
class NcclTransport final : public AllreduceTransport {
 public:
  NcclTransport(NcclCommunicator& nccl, int device) : nccl_(nccl), device_(select(device)) {}
  void load(const std::vector<float>& values) override {
    if (buffer_.bytes() != values.size() * 4) {
      buffer_ = DeviceBuffer();  // free the old size first
      buffer_ = DeviceBuffer(values.size() * 4, nullptr);
    }
    DLSCALE_CHECK_CUDA(
        cudaMemcpyAsync(buffer_.get(), values.data(), values.size() * 4, cudaMemcpyHostToDevice, stream_));
    DLSCALE_CHECK_CUDA(cudaStreamSynchronize(stream_));
  }
  void reduce() override {
    nccl_.allreduce(buffer_.as(), buffer_.bytes() / 4, NcclCommunicator::Op::kSum, stream_);
    DLSCALE_CHECK_CUDA(cudaStreamSynchronize(stream_));
  }
  std::vector<float> read() override {
    std::vector<float> values(buffer_.bytes() / 4);
    DLSCALE_CHECK_CUDA(cudaMemcpyAsync(values.data(), buffer_.get(), buffer_.bytes(), cudaMemcpyDeviceToHost, stream_));
    DLSCALE_CHECK_CUDA(cudaStreamSynchronize(stream_));
    return values;
  }

 private:
  NcclCommunicator& nccl_;
  int device_;  // made current before the stream below
  Stream stream_;
  DeviceBuffer buffer_;
};

/// One rank alone: NCCL needs no bootstrap to reduce over it.
class SingleRank final : public RankGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void broadcast(void*, size_t, int) const override {}
};

class NcclReducer final : public GradientReducer {
 public:
  // One rank has nothing to average: its communicator is only made if the microbenchmark asks.
  NcclReducer(const RankGroup& ranks, int device, std::function<void*(const Model&)> stream_of)
      : device_(select(device)),
        stream_of_(std::move(stream_of)),
        nccl_(ranks.size() > 1 ? std::make_unique<NcclCommunicator>(ranks, device) : nullptr) {}
  void bind(const Model& model) override { stream_ = static_cast<cudaStream_t>(stream_of_(model)); }
  void average(const GradBuffer& grads) override {
    if (!grads.on_device) throw std::logic_error("the NCCL reducer needs gradients in GPU memory");
    if (nccl_) nccl_->allreduce(grads.data, grads.count, NcclCommunicator::Op::kAverage, stream_);
  }
  std::unique_ptr<AllreduceTransport> transport() override {
    if (!nccl_) nccl_ = std::make_unique<NcclCommunicator>(SingleRank(), device_);
    return std::make_unique<NcclTransport>(*nccl_, device_);
  }

 private:
  int device_;
  std::function<void*(const Model&)> stream_of_;
  std::unique_ptr<NcclCommunicator> nccl_;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::unique_ptr<StepTimer> make_event_timer(void* stream, int device) {
  return std::make_unique<CudaEventStepTimer>(stream, device);
}

std::unique_ptr<GradientReducer> make_nccl_reducer(const RankGroup& ranks, int device,
                                                   std::function<void*(const Model&)> stream_of) {
  return std::make_unique<NcclReducer>(ranks, device, std::move(stream_of));
}

}  // namespace dlscale::cuda
