#include "drivers/gpu/gpu_step.h"

#include <mutex>
#include <stdexcept>
#include <utility>

#include "drivers/gpu/cuda_resources.h"
#include "drivers/gpu/event_timer.h"
#include "drivers/gpu/nccl_communicator.h"
#include "drivers/gradient_buckets.h"

namespace dlscale::gpu {

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
    DLSCALE_CHECK_CUDA(cudaEventRecord(done_, stream_));
    nccl_.wait(done_, Deadline::max());
  }
  std::vector<float> read() override {
    std::vector<float> values(buffer_.bytes() / 4);
    DLSCALE_CHECK_CUDA(cudaMemcpyAsync(values.data(), buffer_.get(), buffer_.bytes(), cudaMemcpyDeviceToHost, stream_));
    DLSCALE_CHECK_CUDA(cudaStreamSynchronize(stream_));
    return values;
  }

 private:
  NcclCommunicator& nccl_;
  int device_;  // made current before the stream and the event below
  Stream stream_;
  SyncEvent done_;
  DeviceBuffer buffer_;
};

/// One rank alone: NCCL needs no bootstrap to reduce over it.
class SingleRank final : public RankGroup {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void broadcast(void*, size_t, int) const override {}
};

/// NCCL over the case's ranks. Without buckets, one all-reduce of the whole gradient buffer on
/// the model's stream after backward. With buckets, one all-reduce per bucket on a stream of the
/// reducer's own, queued as soon as the model has queued the last work that writes the bucket
/// (an event on the model's stream orders it after that work), so that it runs on the GPU beside
/// the rest of backward; average() queues the buckets not started yet and makes the model's
/// stream wait for them all, so the update reads the averages. Buckets start strictly from the
/// last to the first, so that every rank issues the same collectives in the same order whatever
/// order its model reported them in. Nothing waits for NCCL without the step's deadline
/// (NcclCommunicator), so a peer that never joins cannot hold the rank.
class NcclReducer final : public GradientReducer {
 public:
  // The communicator first: its set-up is collective, and nothing that could fail on one rank
  // may come before it. One rank has nothing to average: its communicator is only made for
  // buckets or the microbenchmark.
  NcclReducer(const RankGroup& ranks, int device, Deadline deadline, std::function<void*(const Model&)> stream_of)
      : nccl_(ranks.size() > 1 ? std::make_unique<NcclCommunicator>(ranks, device, deadline) : nullptr),
        device_(select(device)),
        stream_of_(std::move(stream_of)) {}
  // The communicator goes before the stream its reductions are queued on.
  ~NcclReducer() override { nccl_.reset(); }
  NcclReducer(const NcclReducer&) = delete;
  NcclReducer& operator=(const NcclReducer&) = delete;

  bool bind(Model& model, double bucket_mb) override {
    stream_ = static_cast<cudaStream_t>(stream_of_(model));
    schedule_ = BucketSchedule();
    if (bucket_mb <= 0) return false;
    grads_ = model.grad_buffer();
    if (!grads_.on_device) throw std::logic_error("the NCCL reducer needs gradients in GPU memory");
    // On one GPU there is nothing to average, but buckets asked for (the default's give 0 here:
    // suite/case/case_setup.cpp) are still reduced, over a one-rank communicator, on their stream,
    // so that one GPU shows what overlapping them with backward costs and hides (docs/metrics.md).
    if (!nccl_) nccl_ = std::make_unique<NcclCommunicator>(SingleRank(), device_);
    // Cut anywhere: the buffer is in the backend's own order (cuDNN's weight space, say), whose
    // layer boundaries the harness does not know.
    schedule_ = BucketSchedule(grads_.count, bucket_mb);
    return model.set_gradient_ready_callback([this](size_t first, size_t count) { ready(first, count); });
  }

  std::string mechanism() const override {
    if (!schedule_.buckets().empty()) return "nccl_buckets_stream";
    return nccl_ ? "nccl" : "none";
  }
  size_t bucket_count() const override {
    return schedule_.buckets().empty() ? (nccl_ ? 1 : 0) : schedule_.buckets().size();
  }

  void start_step(Deadline deadline) override {
    const std::lock_guard<std::mutex> lock(mutex_);
    deadline_ = deadline;
    schedule_.restart();
    queued_ = false;
  }

  void average(const GradBuffer& grads) override {
    if (!grads.on_device) throw std::logic_error("the NCCL reducer needs gradients in GPU memory");
    const std::lock_guard<std::mutex> lock(mutex_);
    if (schedule_.buckets().empty()) {
      if (!nccl_) return;
      nccl_->allreduce(grads.data, grads.count, NcclCommunicator::Op::kAverage, stream_, deadline_);
      DLSCALE_CHECK_CUDA(cudaEventRecord(done_, stream_));
    } else {
      schedule_.start_rest([this](size_t index) { start(index); });  // those not all reported
      DLSCALE_CHECK_CUDA(cudaEventRecord(done_, side_));
      DLSCALE_CHECK_CUDA(cudaStreamWaitEvent(stream_, done_, 0));
    }
    queued_ = true;
  }

  void wait() override {
    if (!queued_) return;
    queued_ = false;
    nccl_->wait(done_, deadline_);
  }

  std::unique_ptr<AllreduceTransport> transport() override {
    if (!nccl_) nccl_ = std::make_unique<NcclCommunicator>(SingleRank(), device_);
    return std::make_unique<NcclTransport>(*nccl_, device_);
  }

 private:
  /// Elements [first, first + count) are final (their work is queued on the model's stream).
  /// Under the lock: a LibTorch model may report from autograd's threads.
  void ready(size_t first, size_t count) {
    const std::lock_guard<std::mutex> lock(mutex_);
    schedule_.ready(first, count, [this](size_t index) { start(index); });
  }

  /// Queues bucket `index`'s all-reduce on the side stream, after the work queued so far on the
  /// model's stream.
  void start(size_t index) {
    const BucketRange& b = schedule_.buckets()[index];
    DLSCALE_CHECK_CUDA(cudaEventRecord(ready_, stream_));
    DLSCALE_CHECK_CUDA(cudaStreamWaitEvent(side_, ready_, 0));
    nccl_->allreduce(grads_.data + b.first, b.count, NcclCommunicator::Op::kAverage, side_, deadline_);
  }

  std::unique_ptr<NcclCommunicator> nccl_;
  int device_;  // made current before the streams and events below
  std::function<void*(const Model&)> stream_of_;
  Stream side_;             ///< the buckets' all-reduces
  SyncEvent ready_, done_;  ///< the model's work so far; the step's reductions
  cudaStream_t stream_ = nullptr;
  GradBuffer grads_;
  std::mutex mutex_;
  BucketSchedule schedule_;  ///< no buckets: one all-reduce after backward
  Deadline deadline_ = Deadline::max();
  bool queued_ = false;  ///< average() queued reductions that wait() has not seen complete
};

}  // namespace

std::unique_ptr<StepTimer> make_event_timer(void* stream, int device) {
  return std::make_unique<CudaEventStepTimer>(stream, device);
}

std::unique_ptr<GradientReducer> make_nccl_reducer(const RankGroup& ranks, int device, Deadline deadline,
                                                   std::function<void*(const Model&)> stream_of) {
  return std::make_unique<NcclReducer>(ranks, device, deadline, std::move(stream_of));
}

}  // namespace dlscale::gpu
