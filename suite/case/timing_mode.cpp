// Timing mode: seconds per training step. Warm-up steps, then timed steps, each ending with one
// all-reduce of the loss and of whether it failed anywhere; the meters read at the two ends of
// the timed region; every rank's samples gathered on the case's rank 0 and summarised there.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "io/fault_injection.h"
#include "suite/case/case_utilisation.h"
#include "suite/case/gradient_noise.h"
#include "suite/case/outcome.h"
#include "suite/case/run_mode.h"
#include "suite/case/training_step.h"
#include "suite/comm/clock_sync.h"
#include "suite/errors.h"
#include "suite/exit_code.h"
#include "suite/meters/allreduce_microbenchmark.h"
#include "suite/meters/statistics.h"
#include "suite/process/stop_signals.h"

namespace dlscale {

namespace {

using Clock = std::chrono::steady_clock;

/// A driver's reducer that leaves out one average() unless `skipped` says it was done already
/// (fault_injection::skip_reduction_rank).
class SkipsOneReduction final : public GradientReducer {
 public:
  SkipsOneReduction(GradientReducer& reducer, bool& skipped) : reducer_(reducer), skipped_(skipped) {}
  bool bind(Model& model, double bucket_mb) override { return reducer_.bind(model, bucket_mb); }
  void average(const GradBuffer& grads) override {
    if (!skipped_) {
      skipped_ = true;
      return;
    }
    reducer_.average(grads);
  }
  void start_step(Deadline deadline) override { reducer_.start_step(deadline); }
  void wait() override { reducer_.wait(); }
  std::unique_ptr<AllreduceTransport> transport() override { return reducer_.transport(); }
  std::string mechanism() const override { return reducer_.mechanism(); }
  size_t bucket_count() const override { return reducer_.bucket_count(); }

 private:
  GradientReducer& reducer_;
  bool& skipped_;
};

/// The meters of the timed region: opened before it, read at its two ends only (the GPU's
/// sampling thread wakes every 100 ms), on every rank. The packages' energy counters are the
/// host's: its first rank reads them, so that the ranks' energies add up.
class RegionMeters {
 public:
  RegionMeters(const CaseContext& ctx, int gpu) : host_(ctx.mpi.host()) {
    if (ctx.mpi.local_rank() == 0) rapl_.emplace();
    if (ctx.c.gpu()) {
      gpu_.emplace(process_nvml(), pci_bus_id_of(ctx.c.driver->describe_device(DeviceType::kCuda, gpu)));
    } else {
      gpu_.emplace("a CPU case has no GPU");
    }
  }
  void start() {
    if (rapl_) rapl_->start();
    gpu_->start();
    cpu_.start();
  }
  RankUtilisation stop() {
    const CpuUsage cpu = cpu_.stop();
    const GpuUsage gpu = gpu_->stop();
    const Energy energy =
        rapl_ ? rapl_->stop()
              : Energy{kNotMeasured,
                       fmt::format("unavailable: the CPU packages of host {} are read by its first rank (local rank 0)",
                                   host_)};
    return {MeterReadings(cpu, energy, gpu), energy.source, gpu.source};
  }

 private:
  std::string host_;
  std::optional<RaplMeter> rapl_;
  std::optional<GpuMonitor> gpu_;
  CpuMeter cpu_;
};

/// What one step gave on every rank: its times and the mean loss over the ranks.
struct StepResult {
  StepTimes times;
  double mean_loss = 0;
};

class TimingMode final : public CaseMode {
 public:
  TimingMode(const CaseContext& ctx, const PeakLookup& peaks, bool& reduction_skipped)
      : ctx_(ctx), spec_(ctx.c.spec), peaks_(peaks), reduction_skipped_(reduction_skipped) {}

  void measure(PreparedCase& p) override;
  Outcome outcome() const override { return outcome_; }
  bool interrupted() const override { return interrupted_; }
  RankMemory memory(const PreparedCase&) const override { return memory_; }
  void record(PreparedCase& p, CaseResult& r) override;

 private:
  /// One step, warm-up or timed: every rank goes through the barrier and the step's collectives
  /// whatever failed before them on it (the step then trains on the previous batch, and its
  /// result is discarded), then the ranks agree on whether it failed or was interrupted.
  StepResult guarded_step(PreparedCase& p, GradientReducer* reducer, int iteration, bool timed);
  /// A timed step that succeeded on every rank: its samples (and its timeline) kept.
  void keep(const PreparedCase& p, const StepResult& step);
  /// After the warm-up: the buckets merged as it showed best, and their sizes for the record.
  void settle_buckets(PreparedCase& p);
  /// A sharded optimiser on more than one rank: each step's all-gather of the parameters is
  /// recorded apart from the update phase that holds it.
  bool gathers_parameters() const { return spec_.ranks > 1 && spec_.sharding != Sharding::kNone; }
  /// Every rank's `per_rank` values of `mine` into `all` on the case's rank 0, rank-major.
  void gather(const std::vector<double>& mine, int per_rank, std::vector<double>& all) const;
  /// The timed steps' samples of every rank on the case's rank 0.
  StepSamples gather_samples(bool ok) const;
  /// Their timeline (--phases), likewise; `iters`: the timed iterations recorded.
  CaseTimeline gather_timeline(int iters) const;
  /// The all-reduce microbenchmark at the case's gradient size through the reduction the steps
  /// used, and within each host where the case spans several (--phases on more than one rank).
  void run_microbenchmarks(PreparedCase& p, std::optional<AllreduceResult>& across,
                           std::optional<AllreduceResult>& within) const;
  /// Rank 0: the summary and utilisation of a case that succeeded.
  void summarise(CaseResult& r, std::vector<RankUtilisation> meters) const;

  const CaseContext& ctx_;
  const CaseSpec& spec_;
  const PeakLookup& peaks_;
  bool& reduction_skipped_;
  const Optimizer optimizer_ = spec_.make_optimizer();
  Outcome outcome_;
  bool interrupted_ = false;
  Clock::time_point started_;
  Deadline deadline_ = Deadline::max();
  int64_t next_sample_ = 0;
  std::vector<double> times_, phase_times_, losses_, exposed_, parameter_gathers_, bucket_starts_;
  std::vector<double> small_sq_, big_sq_;  ///< the gradient noise scale's norms, per timed step
  /// The sizes of the case's MPI buckets (the harness's), in buffer order; empty: none.
  std::vector<double> bucket_bytes_;
  // The timeline (--phases): each timed step's start on this rank's clock, its buckets'
  // reductions, and the clock's offset to rank 0's before and after the timed steps.
  std::vector<double> step_starts_, bucket_reductions_;
  std::vector<ClockOffset> clock_;
  RankUtilisation meters_;
  RankMemory memory_;  ///< -1 host peak: not prepared, nothing measured
};

StepResult TimingMode::guarded_step(PreparedCase& p, GradientReducer* reducer, int iteration, bool timed) {
  Outcome failed;
  StepResult out;
  const int64_t b = spec_.batch_per_rank();
  const int64_t first = next_sample_;
  try {
    // With a real dataset every iteration trains on the next global batch, each rank on its own
    // slice of it (its micro-batches side by side); the copy in of the first micro-batch happens
    // before the step's barrier, outside the timed region, the others' within the step, as a
    // training loop with gradient accumulation copies each micro-batch in.
    if (p.dataset) {
      p.model->set_batch(p.dataset->batch(first, b));
      next_sample_ += spec_.global_batch();
    }
  } catch (...) {
    failed = outcome_of(std::current_exception());
  }
  MicroBatches micro;
  micro.count = spec_.accumulate;
  micro.earlier = &p.earlier_gradients;
  micro.load = [&](int j) {
    if (p.dataset) p.model->set_batch(p.dataset->batch(first + j * b, b));
  };
  DLSCALE_CHECK_MPI(MPI_Barrier(ctx_.comm));  // every rank starts the step together
  double loss = 0;
  try {
    out.times = training_step(*p.model, ctx_.comm, optimizer_, spec_.phases, p.buckets.get(), p.timer.get(), reducer,
                              deadline_, micro, p.mpi);
    loss = p.model->loss();
    if (!std::isfinite(loss) && failed.ok()) failed = {Status::kError, fmt::format("the loss is {}", loss)};
    const double elapsed = std::chrono::duration<double>(Clock::now() - started_).count();
    if (spec_.case_timeout > 0 && failed.ok() && elapsed > spec_.case_timeout) {
      failed = {Status::kTimeout, fmt::format("still training after --case-timeout {} s", spec_.case_timeout)};
    }
  } catch (...) {
    if (failed.ok()) failed = outcome_of(std::current_exception());
  }
  if (!failed.ok()) {
    failed.message = fmt::format("{} {}: {}", timed ? "iteration" : "warm-up step", iteration, failed.message);
  }
  double mine[3] = {failed.ok() ? loss / spec_.ranks : 0.0, failed.ok() ? 0.0 : 1.0, stop_signal() != 0 ? 1.0 : 0.0};
  double sum[3] = {0, 0, 0};
  DLSCALE_CHECK_MPI(MPI_Allreduce(mine, sum, 3, MPI_DOUBLE, MPI_SUM, ctx_.comm));
  if (sum[1] > 0) outcome_ = agree(ctx_.comm, failed);
  interrupted_ = sum[2] > 0;
  out.mean_loss = sum[0];
  return out;
}

void TimingMode::keep(const PreparedCase& p, const StepResult& step) {
  times_.push_back(step.times.total);
  if (spec_.ranks > 1) exposed_.push_back(step.times.exposed_allreduce);
  if (gathers_parameters()) parameter_gathers_.push_back(step.times.parameter_gather);
  if (spec_.phases) phase_times_.insert(phase_times_.end(), step.times.phase, step.times.phase + kPhaseCount);
  losses_.push_back(step.mean_loss);
  small_sq_.push_back(step.times.small_sq);
  big_sq_.push_back(step.times.big_sq);
  if (p.buckets) {
    const std::vector<double>& started = p.buckets->start_times();
    bucket_starts_.insert(bucket_starts_.end(), started.begin(), started.end());
  }
  if (clock_.empty()) return;  // no timeline
  step_starts_.push_back(step.times.start_s);
  if (p.buckets) {
    const std::vector<double>& reduced = p.buckets->reduction_times();
    bucket_reductions_.insert(bucket_reductions_.end(), reduced.begin(), reduced.end());
  }
}

void TimingMode::settle_buckets(PreparedCase& p) {
  // The timed steps reduce the buckets as the warm-up's last step showed them best merged; the
  // outcome and the interruption are agreed, so every rank merges or none does.
  if (p.buckets && outcome_.ok() && !interrupted_) p.buckets->merge_waiting_buckets();
  bucket_bytes_.clear();
  if (p.buckets) {
    for (const BucketRange& b : p.buckets->buckets()) {
      bucket_bytes_.push_back(static_cast<double>(b.count * sizeof(float)));
    }
  }
}

void TimingMode::measure(PreparedCase& p) {
  GradientReducer* reducer = p.reducer.get();
  std::optional<SkipsOneReduction> skipping;
  if (reducer != nullptr && ctx_.mpi.rank() == fault_injection::skip_reduction_rank()) {
    reducer = &skipping.emplace(*reducer, reduction_skipped_);
  }
  reset_memory_mark(ctx_.progress);
  // A failure anywhere (out of memory in any iteration, a library error, a non-finite loss, a
  // dataset read, a device collective past the case's deadline) ends the case on every rank,
  // recorded with its status, and the sweep goes on. Only a lost rank or a broken communicator
  // ends the job.
  started_ = Clock::now();
  deadline_ = deadline_after(spec_.case_timeout);
  next_sample_ = int64_t{ctx_.case_rank} * spec_.accumulate * spec_.batch_per_rank();
  RegionMeters meters(ctx_, p.gpu);
  const int sleeper = fault_injection::sleep_rank();
  double slept = 0;
  try {
    for (int i = 0; i < spec_.warmup && outcome_.ok() && !interrupted_; ++i) {
      const StepResult step = guarded_step(p, reducer, i + 1, false);
      if (outcome_.ok()) ctx_.progress.iteration("warm-up", i + 1, spec_.warmup, step.times.total);
    }
    settle_buckets(p);
    // A case that trains until its --case-timeout may ask for billions of steps: reserve what a
    // case usually records, not that.
    times_.reserve(static_cast<size_t>(std::min(spec_.iterations, 1 << 16)));
    // Outside the timed region, and on every rank alike: the outcome and the interruption are
    // agreed by all.
    if (spec_.phases && outcome_.ok() && !interrupted_) clock_.push_back(measure_clock_offset(ctx_.comm));
    meters.start();
    for (int i = 0; i < spec_.iterations && outcome_.ok() && !interrupted_; ++i) {
      const StepResult step = guarded_step(p, reducer, i + 1, true);
      if (ctx_.mpi.rank() == sleeper) {
        usleep(static_cast<useconds_t>(step.times.total * 1e6));
        slept += step.times.total;
      }
      if (!outcome_.ok() || interrupted_) break;
      keep(p, step);
      ctx_.progress.iteration("iteration", i + 1, spec_.iterations, step.times.total);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "dlscale: rank {}: case {} failed while training and MPI cannot recover: {}\n", ctx_.mpi.rank(),
               ctx_.c.key, e.what());
    MPI_Abort(MPI_COMM_WORLD, exit_code(ExitCode::kFatal));
  }
  meters_ = meters.stop();
  // After the meters: the ping-pong is not the steps' work. The second offset shows how far the
  // clocks drifted over the timed steps.
  if (!clock_.empty()) clock_.push_back(measure_clock_offset(ctx_.comm));
  if (ctx_.mpi.rank() == sleeper) {
    fmt::print(stderr, "dlscale: test: rank {} slept {:.6f} s of its {:.6f} s timed region (DLSCALE_TEST_SLEEP_RANK)\n",
               ctx_.mpi.rank(), slept, meters_.meters.wall_s);
  }
  memory_ = p.memory();
}

void TimingMode::gather(const std::vector<double>& mine, int per_rank, std::vector<double>& all) const {
  if (ctx_.case_rank == 0) all.resize(static_cast<size_t>(spec_.ranks) * static_cast<size_t>(per_rank));
  DLSCALE_CHECK_MPI(MPI_Gather(mine.data(), per_rank, MPI_DOUBLE, all.data(), per_rank, MPI_DOUBLE, 0, ctx_.comm));
}

StepSamples TimingMode::gather_samples(bool ok) const {
  const int ranks = spec_.ranks;
  const int iters = ok ? spec_.iterations : 0;
  StepSamples s;
  s.iterations = iters;
  gather(times_, iters, s.iter_time_s);
  if (spec_.phases && iters > 0) gather(phase_times_, iters * kPhaseCount, s.phase_time_s);
  if (ranks > 1 && iters > 0) gather(exposed_, iters, s.exposed_allreduce_s);
  if (gathers_parameters() && iters > 0) gather(parameter_gathers_, iters, s.parameter_gather_s);
  // The buckets are the same on every rank of a case that trained (the same driver and buffer).
  const auto buckets = static_cast<int>(bucket_bytes_.size());
  if (buckets > 0 && iters > 0) {
    gather(bucket_starts_, iters * buckets, s.bucket_start_s);
    s.buckets = buckets;
    s.bucket_bytes = bucket_bytes_;
  }
  s.loss = losses_;
  if (spec_.phases && iters > 0) s.timeline = gather_timeline(iters);
  return s;
}

CaseTimeline TimingMode::gather_timeline(int iters) const {
  // A case that recorded iterations measured both offsets (measure()).
  std::vector<double> at, offset, bound;
  for (const ClockOffset& c : clock_) {
    at.push_back(c.at_s);
    offset.push_back(c.offset_s);
    bound.push_back(c.bound_s);
  }
  CaseTimeline t;
  gather(step_starts_, iters, t.step_start_s);
  const auto buckets = static_cast<int>(bucket_bytes_.size());
  if (buckets > 0) gather(bucket_reductions_, iters * buckets * 2, t.bucket_reduction_s);
  gather(at, 2, t.clock_at_s);
  gather(offset, 2, t.clock_offset_s);
  gather(bound, 2, t.clock_bound_s);
  return t;
}

/// Every rank's meter readings on the case's rank 0 (collective, whatever the outcome).
std::vector<RankUtilisation> gather_meters(const CaseContext& ctx, const RankUtilisation& mine) {
  const bool root = ctx.case_rank == 0;
  std::vector<MeterReadings> all(root ? static_cast<size_t>(ctx.c.spec.ranks) : 0);
  DLSCALE_CHECK_MPI(MPI_Gather(&mine.meters, kMeterReadingCount, MPI_DOUBLE, all.data(), kMeterReadingCount, MPI_DOUBLE,
                               0, ctx.comm));
  const std::vector<std::string> cpu_sources = gather_strings(ctx.comm, mine.cpu_energy_source);
  const std::vector<std::string> gpu_sources = gather_strings(ctx.comm, mine.gpu_source);
  std::vector<RankUtilisation> ranks;
  for (size_t r = 0; r < all.size(); ++r) ranks.push_back({all[r], cpu_sources[r], gpu_sources[r]});
  return ranks;
}

void TimingMode::run_microbenchmarks(PreparedCase& p, std::optional<AllreduceResult>& across,
                                     std::optional<AllreduceResult>& within) const {
  const int64_t params = ctx_.c.params;
  AllreduceOptions options;
  // Powers of two up to the gradient size, for the fit; starting at most at a quarter of it so
  // that even a tiny model gets at least two sizes.
  options.sizes_bytes = allreduce_sizes(std::min<int64_t>(1024, params), params * 4, {params * 4});
  options.warmup = 2;
  options.iterations = 5;
  std::unique_ptr<AllreduceTransport> transport;
  if (p.reducer) {
    p.model.reset();  // its memory is measured; the microbenchmark may need the room
    transport = p.reducer->transport();
  }
  across = run_allreduce_benchmark(ctx_.comm, options, transport.get());
  // Across hosts the fit above is the network's; the case's ranks that share a host measure
  // their own links too (each host's at once: the groups are disjoint), so that the projection
  // has both. On host memory through MPI only: a driver's reducer spans the whole case.
  const CaseRanks& placed = ctx_.c.placed;
  if (placed.hosts > 1 && placed.max_per_host > 1 && !p.reducer) {
    MPI_Comm node = MPI_COMM_NULL;
    DLSCALE_CHECK_MPI(MPI_Comm_split_type(ctx_.comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
    const Communicator host_comm(node);
    within = run_allreduce_benchmark(host_comm.get(), options, nullptr);
  }
}

/// Wrong sums from the reduction the steps used (rank 0 sees its own host's within-host run
/// only): the case's numbers cannot be trusted.
int64_t wrong_elements(const AllreduceResult& across, const std::optional<AllreduceResult>& within) {
  int64_t wrong = 0;
  for (int64_t e : across.errors) wrong += e;
  if (within) {
    for (int64_t e : within->errors) wrong += e;
  }
  return wrong;
}

/// What the projection takes as a case's compute: the median of the slowest rank's forward,
/// backward and update; sharded, the update of its share apart (less the parameters' all-gather,
/// which the ring model counts with the network), as it shrinks with P.
struct ProjectedCompute {
  double compute_s = 0, sharded_update_s = 0;
};
ProjectedCompute projected_compute(const StepSamples& steps, int ranks) {
  const auto iters = static_cast<int>(steps.iterations);
  ProjectedCompute out;
  if (steps.parameter_gather_s.empty()) {
    out.compute_s = median(slowest_rank(steps.phase_time_s, ranks, iters, kPhaseCount, {kForward, kBackward, kUpdate}));
    return out;
  }
  out.compute_s = median(slowest_rank(steps.phase_time_s, ranks, iters, kPhaseCount, {kForward, kBackward}));
  std::vector<double> update(steps.parameter_gather_s.size());
  for (size_t i = 0; i < update.size(); ++i) {
    update[i] = std::max(0.0, steps.phase_time_s[i * kPhaseCount + kUpdate] - steps.parameter_gather_s[i]);
  }
  out.sharded_update_s = median(slowest_rank(update, ranks, iters));
  return out;
}

/// The step-time projection built on the case's microbenchmark (`within`: its ranks' own
/// within-host one, where it spanned hosts); `local_size`: the job's ranks on this host;
/// `value_bytes`: the bytes of one of the model's parameters.
CaseProjection case_projection(const ResolvedCase& c, const AllreduceResult& across,
                               const std::optional<AllreduceResult>& within, const ProjectedCompute& compute,
                               size_t value_bytes, int local_size) {
  std::vector<int64_t> targets{1, 2, 3, 4, 5, 6, 7, 8};
  for (int64_t p = 16; p <= 1024; p *= 2) targets.push_back(p);
  CaseProjection out;
  out.compute_s = compute.compute_s;
  out.sharded_update_s = compute.sharded_update_s;
  // What the all-reduce sends: 16-bit gradients with --grad-compression, half the float32 ones.
  // Sharded, a reduce-scatter of those and an all-gather of the parameters, each half a ring:
  // the ring of their mean.
  const double grads = static_cast<double>(c.grad_bytes());
  out.grad_bytes = grads * wire_bytes(c.spec.grad_compression) / 4.0;
  if (c.spec.sharding != Sharding::kNone) out.grad_bytes = (out.grad_bytes + grads * value_bytes / 4.0) / 2;
  // Packed, P up to the ranks this job has on a host stays on one host; spread, every P > 1
  // crosses hosts.
  out.fit = RingFit{across.alpha_s, across.beta_s_per_byte, c.spec.ranks, c.placed.hosts};
  out.network.ranks_per_host = c.spec.placement == Placement::kSpread ? 1 : local_size;
  (c.placed.hosts > 1 ? out.network.between : out.network.within) = out.fit;
  if (within && within->ranks > 1) out.network.within = {within->alpha_s, within->beta_s_per_byte, within->ranks, 1};
  // A GPU rank's compute does not crowd a node's CPU cores: one "core" per rank, none shared.
  const int threads = c.gpu() ? 1 : c.threads;
  const int cpus = c.gpu() ? local_size : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  out.projection = project_steps(out.compute_s, c.spec.ranks, c.spec.scaling == Scaling::kStrong, out.grad_bytes,
                                 out.network, threads, cpus, local_size, targets, out.sharded_update_s);
  return out;
}

void TimingMode::summarise(CaseResult& r, std::vector<RankUtilisation> meters) const {
  StepSummary s = step_summary(r.steps, ctx_.c);
  r.utilisation = case_utilisation(ctx_.c, peaks_, std::move(meters), s.achieved_flops);
  r.summary = s;
}

void TimingMode::record(PreparedCase& p, CaseResult& r) {
  r.steps = gather_samples(r.outcome.ok());
  if (r.outcome.ok()) {
    r.noise = gather_noise_scale(ctx_.comm, small_sq_, big_sq_, static_cast<double>(spec_.batch_per_rank()),
                                 static_cast<double>(spec_.global_batch()));
  }
  std::vector<RankUtilisation> meters = gather_meters(ctx_, meters_);
  std::optional<AllreduceResult> across, within;
  if (r.outcome.ok() && spec_.phases && spec_.ranks > 1) run_microbenchmarks(p, across, within);
  if (ctx_.case_rank != 0) return;
  if (across) {
    if (const int64_t wrong = wrong_elements(*across, within); wrong > 0) {
      r.outcome = {
          Status::kError,
          fmt::format("the all-reduce microbenchmark of this case found {} wrong elements (/allreduce, errors)",
                      wrong)};
    }
    r.allreduce = CaseAllreduce{*across, ctx_.c.gpu() ? "nccl" : "mpi", ctx_.c.placed.hosts};
    const ParameterBuffer params = p.model->parameters();
    r.projection = case_projection(ctx_.c, *across, within, projected_compute(r.steps, spec_.ranks),
                                   params.data != nullptr ? params.value_bytes : sizeof(float), ctx_.mpi.local_size());
  }
  if (r.outcome.ok()) summarise(r, std::move(meters));
}

}  // namespace

StepSummary step_summary(const StepSamples& steps, const ResolvedCase& c) {
  const int ranks = c.spec.ranks;
  const auto iters = static_cast<int>(steps.iterations);
  StepSummary s;
  s.stats = step_stats(steps.iter_time_s, ranks, iters);
  s.samples_per_s = static_cast<double>(c.spec.global_batch()) / s.stats.median;
  s.achieved_flops = c.train_flops_per_step / s.stats.median;
  if (!steps.exposed_allreduce_s.empty()) {
    s.exposed_allreduce_median_s = median(slowest_rank(steps.exposed_allreduce_s, ranks, iters, 1, {0}));
    s.exposed_allreduce_least_median_s = median(least_over_ranks(steps.exposed_allreduce_s, ranks, iters));
  }
  if (c.spec.phases) {
    std::array<double, kPhaseCount> phase{};
    for (int k = 0; k < kPhaseCount; ++k) {
      phase[static_cast<size_t>(k)] = median(slowest_rank(steps.phase_time_s, ranks, iters, kPhaseCount, {k}));
    }
    s.phase_median_s = phase;
  }
  return s;
}

std::unique_ptr<CaseMode> make_timing_mode(const CaseContext& ctx, const PeakLookup& peaks, bool& reduction_skipped) {
  return std::make_unique<TimingMode>(ctx, peaks, reduction_skipped);
}

}  // namespace dlscale
