#include "suite/case/training_step.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <exception>
#include <stdexcept>

#include "suite/comm/clock_sync.h"
#include "suite/errors.h"

namespace dlscale {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

class HostStepTimer final : public StepTimer {
 public:
  explicit HostStepTimer(Model& model) : model_(model) {}
  void mark(int i) override {
    model_.synchronize();
    marks_[static_cast<size_t>(i)] = Clock::now();
  }
  double seconds(int from, int to) override {
    return seconds_between(marks_[static_cast<size_t>(from)], marks_[static_cast<size_t>(to)]);
  }

 private:
  Model& model_;
  Clock::time_point marks_[kPhaseCount + 1];
};

}  // namespace

std::unique_ptr<StepTimer> make_host_step_timer(Model& model) { return std::make_unique<HostStepTimer>(model); }

Deadline deadline_after(double seconds) {
  if (seconds <= 0) return Deadline::max();
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

namespace {

/// The step's gradient reduction, through the driver's reducer (NCCL), the buckets, or one
/// all-reduce after backward; called by every rank, also one whose forward or backward `failed`.
void reduce_gradients(Model& model, MPI_Comm comm, BucketedAllreduce* buckets, GradientReducer* reducer, bool failed,
                      const MpiReduction& how, StepGradients& grads) {
  if (reducer != nullptr) {
    try {
      reducer->average(model.grad_buffer());
    } catch (...) {
      // A reduction that failed in backward (its communicator abandoned) fails here again: the
      // first failure is the one to report.
      if (!failed) throw;
    }
  } else if (buckets != nullptr) {
    buckets->finish();
  } else {
    allreduce_gradients(model.grad_buffer(), comm, how, grads);
  }
}

/// Micro-batch `j`'s gradients into `earlier` (set for the first, added for the next); returns
/// their squared norm.
double accumulate(const GradBuffer& grads, std::vector<float>& earlier, int j) {
  if (grads.on_device) throw std::runtime_error("gradient accumulation sums gradients in host memory");
  const float* g = grads.data;
  float* sum = earlier.data();
  const auto n = static_cast<int64_t>(grads.count);
  double sq = 0;
#pragma omp parallel for schedule(static) reduction(+ : sq)
  for (int64_t i = 0; i < n; ++i) {
    sq += static_cast<double>(g[i]) * g[i];
    sum[i] = j == 0 ? g[i] : sum[i] + g[i];
  }
  return sq;
}

}  // namespace

StepTimes training_step(Model& model, MPI_Comm comm, const Optimizer& opt, bool time_phases, BucketedAllreduce* buckets,
                        StepTimer* timer, GradientReducer* reducer, Deadline deadline, const MicroBatches& micro,
                        const MpiReduction& how) {
  std::unique_ptr<StepTimer> host;
  if (timer == nullptr) {
    host = make_host_step_timer(model);
    timer = host.get();
  }
  StepTimes t;
  int ranks = 1;
  DLSCALE_CHECK_MPI(MPI_Comm_size(comm, &ranks));
  const int k = std::max(1, micro.count);
  if (k > 1 && (reducer != nullptr || micro.earlier == nullptr)) {
    throw std::logic_error("gradient accumulation needs the harness's reduction and its buffer");
  }
  // The exposed all-reduce is always measured where there is one: two more marks, which cost a
  // host clock read (CPU models synchronise nothing) or a GPU event.
  const bool time_allreduce = time_phases || ranks > 1;
  if (reducer != nullptr) reducer->start_step(deadline);
  StepGradients grads;
  grads.micro_batches = k;
  double earlier_sq = 0;
  timer->mark(0);
  // Read after the first mark, not before it: where the rank loses its core in between, the step
  // so placed begins no earlier than its buckets' times, which count from here, and ends no
  // earlier than their reductions (a timeline nests them in the step).
  const Clock::time_point start = Clock::now();
  t.start_s = monotonic_seconds(start);
  if (buckets != nullptr) buckets->start_step(start, grads);
  // A rank whose forward or backward fails (out of memory, a library error) still takes part in
  // the gradient reduction below, which is collective, so that the other ranks do not wait
  // forever; it then rethrows, and the ranks agree on the failure after the step (measure()).
  std::exception_ptr failure;
  try {
    if (k > 1) {
      // The micro-batches before the last: their gradients summed on the host, no bucket started.
      if (buckets != nullptr) buckets->hold(true);
      micro.earlier->resize(model.grad_buffer().count);
      for (int j = 0; j + 1 < k; ++j) {
        if (j > 0) micro.load(j);
        model.forward();
        model.backward();
        earlier_sq += accumulate(model.grad_buffer(), *micro.earlier, j);
      }
      grads.earlier = micro.earlier->data();
      micro.load(k - 1);
    }
    model.forward();
    if (time_phases) timer->mark(1);
    if (buckets != nullptr) buckets->hold(false);
    model.backward();
  } catch (...) {
    failure = std::current_exception();
  }
  if (time_allreduce && !failure) timer->mark(2);
  reduce_gradients(model, comm, buckets, reducer, failure != nullptr, how, grads);
  if (buckets == nullptr || !buckets->sharded()) {
    if (failure) std::rethrow_exception(failure);
    if (time_allreduce) timer->mark(3);
    model.update(opt);
  } else {
    // Sharded: the update of this rank's share, then the all-gather of every rank's, a collective
    // that a rank whose step failed joins too (with its parameters as they were).
    if (time_allreduce && !failure) timer->mark(3);
    try {
      if (!failure) model.update(opt, buckets->shard());
    } catch (...) {
      failure = std::current_exception();
    }
    const Clock::time_point gather_start = Clock::now();
    buckets->gather_parameters(model);
    t.parameter_gather = std::chrono::duration<double>(Clock::now() - gather_start).count();
    if (failure) std::rethrow_exception(failure);
  }
  const int last = time_phases ? kPhaseCount : 1;
  timer->mark(last);
  // After the whole step is queued, so that the device never idles for the host; reading the
  // timer below then waits for no collective.
  if (reducer != nullptr) reducer->wait();
  t.total = timer->seconds(0, last);
  if (time_phases) {
    for (int p = 0; p < kPhaseCount; ++p) t.phase[p] = timer->seconds(p, p + 1);
  }
  if (ranks > 1) t.exposed_allreduce = timer->seconds(2, 3);
  if (reducer == nullptr && (ranks > 1 || k > 1)) {
    t.small_sq = (earlier_sq + grads.last_sq) / k;
    t.big_sq = grads.mean_sq;
  }
  return t;
}

}  // namespace dlscale
