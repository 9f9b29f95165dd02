#include "suite/gpu_binding.h"

#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>

#include "suite/errors.h"

#ifdef DLSCALE_WITH_CUDA
#include "drivers/cuda/event_timer.h"
#include "drivers/cuda/gpu_devices.h"
#include "drivers/cuda/nccl_communicator.h"
#endif

namespace dlscale {

int gpu_index_for(int local_rank) {
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  if (visible != nullptr && *visible != '\0' && std::string(visible).find(',') == std::string::npos) return 0;
#ifdef DLSCALE_WITH_CUDA
  const int count = cuda::visible_gpu_count(nullptr);
  if (count > 0) return local_rank % count;
#endif
  return local_rank;
}

int visible_gpus(std::string* why) {
#ifdef DLSCALE_WITH_CUDA
  return cuda::visible_gpu_count(why);
#else
  if (why != nullptr) *why = "this build has no CUDA";
  return 0;
#endif
}

std::string describe_gpu(int index) {
#ifdef DLSCALE_WITH_CUDA
  std::string why;
  if (index < cuda::visible_gpu_count(&why)) return cuda::gpu_info(index).describe();
  return fmt::format("cuda:{} (not available: {})", index, why.empty() ? "no such GPU" : why);
#else
  return fmt::format("cuda:{} (this build has no CUDA)", index);
#endif
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

bool gpus_shared(MPI_Comm comm, const std::string& host, int device) {
  const std::vector<std::string> all = gather_strings(comm, host + " " + describe_gpu(device));
  int shared = 0;
  for (size_t a = 0; a < all.size() && shared == 0; ++a) {
    for (size_t b = a + 1; b < all.size(); ++b) shared |= all[a] == all[b] ? 1 : 0;
  }
  return allreduce_max(comm, shared) != 0;  // rank 0 found it; everyone learns it
}

#ifdef DLSCALE_WITH_CUDA
namespace {

/// Makes `device` current and returns it: events and streams belong to the GPU current when
/// they are made.
int select(int device) {
  DLSCALE_CHECK_CUDA(cudaSetDevice(device));
  return device;
}

/// A buffer on the GPU reduced with NCCL; each load copies the values in, each reduce waits for
/// NCCL to finish, as a training step's all-reduce has finished when the update runs.
class NcclTransport final : public AllreduceTransport {
 public:
  /// Reduces over `nccl`, which the caller keeps alive; `owned` is kept alive here (may be null).
  NcclTransport(cuda::NcclCommunicator& nccl, std::unique_ptr<cuda::NcclCommunicator> owned, int device)
      : owned_(std::move(owned)), nccl_(nccl), device_(select(device)) {}
  void load(const std::vector<float>& values) override {
    if (buffer_.bytes() != values.size() * 4) {
      buffer_ = cuda::DeviceBuffer();  // free the old size first
      buffer_ = cuda::DeviceBuffer(values.size() * 4, nullptr);
    }
    DLSCALE_CHECK_CUDA(
        cudaMemcpyAsync(buffer_.get(), values.data(), values.size() * 4, cudaMemcpyHostToDevice, stream_));
    DLSCALE_CHECK_CUDA(cudaStreamSynchronize(stream_));
  }
  void reduce() override {
    nccl_.allreduce(buffer_.as(), buffer_.bytes() / 4, cuda::NcclCommunicator::Op::kSum, stream_);
    DLSCALE_CHECK_CUDA(cudaStreamSynchronize(stream_));
  }
  std::vector<float> read() override {
    std::vector<float> values(buffer_.bytes() / 4);
    DLSCALE_CHECK_CUDA(cudaMemcpy(values.data(), buffer_.get(), buffer_.bytes(), cudaMemcpyDeviceToHost));
    return values;
  }

 private:
  std::unique_ptr<cuda::NcclCommunicator> owned_;
  cuda::NcclCommunicator& nccl_;
  int device_;  // made current before the stream below
  cuda::Stream stream_;
  cuda::DeviceBuffer buffer_;
};

class CudaGpuStep final : public GpuStep {
 public:
  CudaGpuStep(MPI_Comm comm, int device) : device_(select(device)) {
    int ranks = 1;
    DLSCALE_CHECK_MPI(MPI_Comm_size(comm, &ranks));
    if (ranks > 1) nccl_ = std::make_unique<cuda::NcclCommunicator>(comm, device);
  }
  void bind(const Model& model) override {
    select(device_);
    stream_ = model.cuda_stream();
    timer_ = std::make_unique<cuda::EventTimer>(stream_, 5);
  }
  void mark(int i) override { timer_->record(i); }
  double seconds(int from, int to) override { return timer_->seconds(from, to); }
  void allreduce(const GradBuffer& grads) override {
    if (nccl_) {
      nccl_->allreduce(grads.data, grads.count, cuda::NcclCommunicator::Op::kAverage,
                       static_cast<cudaStream_t>(stream_));
    }
  }
  std::unique_ptr<AllreduceTransport> transport() override {
    if (!nccl_) throw std::logic_error("an all-reduce transport needs more than one rank");
    return std::make_unique<NcclTransport>(*nccl_, nullptr, device_);
  }

 private:
  int device_;
  void* stream_ = nullptr;
  std::unique_ptr<cuda::EventTimer> timer_;
  std::unique_ptr<cuda::NcclCommunicator> nccl_;
};

}  // namespace

std::unique_ptr<GpuStep> make_gpu_step(MPI_Comm comm, int device) {
  return std::make_unique<CudaGpuStep>(comm, device);
}

std::unique_ptr<AllreduceTransport> make_nccl_transport(MPI_Comm comm, int device) {
  select(device);
  auto nccl = std::make_unique<cuda::NcclCommunicator>(comm, device);
  cuda::NcclCommunicator& ref = *nccl;
  return std::make_unique<NcclTransport>(ref, std::move(nccl), device);
}
#else
std::unique_ptr<GpuStep> make_gpu_step(MPI_Comm, int) {
  throw std::runtime_error("this build has no CUDA: GPU models cannot be timed or reduced");
}

std::unique_ptr<AllreduceTransport> make_nccl_transport(MPI_Comm, int) {
  throw std::runtime_error("this build has no CUDA, so no NCCL");
}
#endif

}  // namespace dlscale
