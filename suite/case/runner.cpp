#include "suite/case/runner.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "suite/case/accuracy_mode.h"
#include "suite/process/allocator.h"
#include "suite/comm/allreduce_microbenchmark.h"
#include "suite/data/datasets.h"
#include "suite/case/device_binding.h"
#include "suite/errors.h"
#include "suite/comm/gradient_allreduce.h"
#include "suite/meters/host_memory.h"
#include "suite/record/provenance.h"
#include "suite/meters/statistics.h"
#include "suite/process/stop_signals.h"
#include "suite/meters/utilisation.h"
#include "suite/process/watchdog.h"
#include "workloads/catalog.h"
#include "workloads/init.h"

namespace dlscale {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

void add(Attrs& a, const char* name, AttrValue v) { a.emplace_back(name, std::move(v)); }

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

/// "avx512_core_bf16", "avx512_core (bf16 emulated)" when emulation runs, or "" where the driver
/// cannot tell.
std::string describe_isa(const Driver* driver, const CaseSpec& spec) {
  if (driver == nullptr) return "";
  const ComputeIsa isa = driver->compute_isa(spec.device, spec.precision);
  if (isa.native || isa.isa.empty() || !spec.allow_emulation) return isa.isa;  // unsupported unless allowed
  return fmt::format("{} ({} emulated)", isa.isa, precision_name(spec.precision));
}

/// " | optimizer … | test accuracy M [L, H] | train … | test … | target …": an accuracy case's
/// part of its summary line (means and 95% CIs over its repeats).
std::string accuracy_summary_text(const CaseRecord& r) {
  const auto num = [&](const std::string& n) { return std::get<double>(attr(r.accuracy_summary, n)); };
  const auto interval = [&](const std::string& stem, const std::string& unit, double scale, const char* format) {
    return fmt::format(fmt::runtime(format), num(stem + "_mean" + unit) * scale, num(stem + "_ci95_low" + unit) * scale,
                       num(stem + "_ci95_high" + unit) * scale);
  };
  const int64_t repeats = std::get<int64_t>(attr(r.attrs, "repeats"));
  const int64_t reached = std::get<int64_t>(attr(r.accuracy_summary, "targets_reached"));
  std::string line = fmt::format(
      " | {} lr {} | test accuracy {} | training {} | testing {}", std::get<std::string>(attr(r.attrs, "optimizer")),
      std::get<double>(attr(r.attrs, "learning_rate")), interval("test_accuracy", "", 1, "{:.4f} [{:.4f}, {:.4f}]"),
      interval("train_time", "_s", 1, "{:.2f} s [{:.2f}, {:.2f}]"),
      interval("test_time", "_s", 1, "{:.3f} s [{:.3f}, {:.3f}]"));
  const double target = std::get<double>(attr(r.attrs, "target_accuracy"));
  if (std::isfinite(target)) {
    line += reached > 0
                ? fmt::format(" | time to {} {} ({}/{} reached)", target,
                              interval("time_to_target", "_s", 1, "{:.2f} s [{:.2f}, {:.2f}]"), reached, repeats)
                : fmt::format(" | time to {}: not reached in {} epochs", target,
                              std::get<int64_t>(attr(r.attrs, "epochs")));
  }
  return line + fmt::format(" | {} repeat(s) | ok", repeats);
}

/// A case's `memory` table: every rank's peak host RSS and device peak, gathered on rank 0 of
/// `comm` (collective; the table is empty on the other ranks).
Table gather_memory(MPI_Comm comm, int ranks, int64_t host_peak, int64_t device_peak) {
  int rank = 0;
  DLSCALE_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  const int64_t mine[2] = {host_peak, device_peak};
  std::vector<int64_t> all(rank == 0 ? static_cast<size_t>(ranks) * 2 : 0);
  DLSCALE_CHECK_MPI(MPI_Gather(mine, 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T, 0, comm));
  Table table;
  if (rank != 0) return table;
  Column host = Column::of_ints("host_peak_rss_bytes", {}), dev = Column::of_ints("device_peak_bytes", {});
  for (size_t r = 0; r < all.size(); r += 2) {
    host.ints.push_back(all[r]);
    dev.ints.push_back(all[r + 1]);
  }
  table.columns = {host, dev};
  return table;
}

/// Starts the peak-RSS mark afresh before a case trains, so that its memory table holds the
/// case's own peak: first the memory earlier cases freed goes back to the kernel (under
/// --malloc keep it would otherwise stay resident, and count in this case's peak).
void reset_memory_mark(Progress& progress) {
  release_freed_memory();
  if (!reset_peak_rss()) {
    progress.warn("cannot reset the peak-RSS mark: host_peak_rss_bytes is the process's lifetime peak");
  }
}

}  // namespace

Outcome agree(MPI_Comm comm, const Outcome& mine) {
  const auto worst = static_cast<Status>(allreduce_max(comm, static_cast<int>(mine.status)));
  if (worst == Status::kOk) return {};
  const std::vector<std::string> all = gather_strings(comm, mine.status == worst ? mine.message : std::string());
  std::string agreed;
  for (size_t r = 0; r < all.size(); ++r) {
    if (!all[r].empty()) {
      agreed = all.size() > 1 ? fmt::format("rank {}: {}", r, all[r]) : all[r];
      break;
    }
  }
  return {worst, agreed};
}

Outcome outcome_of(const std::exception_ptr& failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const MpiError&) {
    throw;
  } catch (const OutOfMemory& e) {
    return {Status::kOom, e.what()};
  } catch (const Timeout& e) {
    return {Status::kTimeout, e.what()};
  } catch (const std::bad_alloc&) {
    return {Status::kOom, "host allocation failed (std::bad_alloc)"};
  } catch (const std::exception& e) {
    return {Status::kError, e.what()};
  } catch (...) {
    return {Status::kError, "an exception that is not a std::exception"};
  }
}

std::unique_ptr<StepTimer> make_host_step_timer(Model& model) { return std::make_unique<HostStepTimer>(model); }

Deadline deadline_after(double seconds) {
  if (seconds <= 0) return Deadline::max();
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

StepTimes training_step(Model& model, MPI_Comm comm, const Optimizer& opt, bool time_phases, BucketedAllreduce* buckets,
                        StepTimer* timer, GradientReducer* reducer, Deadline deadline) {
  std::unique_ptr<StepTimer> host;
  if (timer == nullptr) {
    host = make_host_step_timer(model);
    timer = host.get();
  }
  StepTimes t;
  int ranks = 1;
  DLSCALE_CHECK_MPI(MPI_Comm_size(comm, &ranks));
  // The exposed all-reduce is always measured where there is one: two more marks, which cost a
  // host clock read (CPU models synchronise nothing) or a GPU event.
  const bool time_allreduce = time_phases || ranks > 1;
  if (buckets != nullptr) buckets->start_step();
  if (reducer != nullptr) reducer->start_step(deadline);
  timer->mark(0);
  // A rank whose forward or backward fails (out of memory, a library error) still takes part in
  // the gradient reduction below, which is collective, so that the other ranks do not wait
  // forever; it then rethrows, and the ranks agree on the failure after the step (measure()).
  std::exception_ptr failure;
  try {
    model.forward();
    if (time_phases) timer->mark(1);
    model.backward();
  } catch (...) {
    failure = std::current_exception();
  }
  if (time_allreduce && !failure) timer->mark(2);
  if (reducer != nullptr) {
    try {
      reducer->average(model.grad_buffer());
    } catch (...) {
      // A reduction that failed in backward (its communicator abandoned) fails here again: the
      // first failure is the one to report.
      if (!failure) throw;
    }
  } else if (buckets != nullptr) {
    buckets->finish();
  } else {
    allreduce_gradients(model.grad_buffer(), comm);
  }
  if (failure) std::rethrow_exception(failure);
  if (time_allreduce) timer->mark(3);
  model.update(opt);
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
  return t;
}

CaseOutcome Runner::run(const CaseSpec& spec, int index, int total) {
  // A case of P ranks runs on the first P world ranks in its placement's order, world rank 0
  // first (it writes the file); the others wait at the closing barrier. One job can so give a
  // whole scaling curve, within a host and across hosts.
  placed_ = case_ranks(mpi_.hosts(), spec.placement, spec.ranks);
  const auto me = std::find(placed_.world.begin(), placed_.world.end(), mpi_.rank());
  const bool member = me != placed_.world.end();
  MPI_Comm sub = MPI_COMM_NULL;
  DLSCALE_CHECK_MPI(
      MPI_Comm_split(mpi_.world(), member ? 0 : MPI_UNDEFINED, static_cast<int>(me - placed_.world.begin()), &sub));
  const Communicator comm(sub);
  CaseOutcome outcome;
  if (member) outcome = run_on(spec, comm.get(), index, total);
  // Idle ranks wait asleep: a blocking barrier busy-polls, and on a node with more ranks than
  // cores the spinning ranks would steal the cores the case is being timed on.
  MPI_Request barrier = MPI_REQUEST_NULL;
  DLSCALE_CHECK_MPI(MPI_Ibarrier(mpi_.world(), &barrier));
  for (int done = 0; !done;) {
    DLSCALE_CHECK_MPI(MPI_Test(&barrier, &done, MPI_STATUS_IGNORE));
    if (!done) usleep(member ? 100 : 2000);
  }
  return outcome;
}

/// What prepare() built for a case: its agreed outcome so far and, when ok, the model and the
/// parts that feed, reduce and time it.
struct Runner::Setup {
  Outcome outcome;
  const Driver* driver = nullptr;
  Workload workload;
  DeviceType device = DeviceType::kCpu;
  int threads = 1;
  int gpu = 0;  ///< the GPU of this rank, for GPU cases
  // The model before the reducer, so that the reducer goes first: a reduction still in flight
  // (its communicator flushed or aborted) then never outlives the gradients it writes.
  std::unique_ptr<Model> model;
  std::unique_ptr<GradientReducer> reducer;  ///< a driver's own (NCCL), else MPI on host memory
  std::unique_ptr<StepTimer> timer;          ///< the model's own (CUDA events), else the host clock's
  std::shared_ptr<const Dataset> dataset;
  std::shared_ptr<const Dataset> test;         ///< accuracy cases: the test set that goes with `dataset`
  std::unique_ptr<BucketedAllreduce> buckets;  ///< with --bucket-mb on more than one rank
  bool overlap = false;
};

/// What measure() recorded on this rank.
struct Runner::Samples {
  Outcome outcome;           ///< a failure inside the loop, agreed by every rank
  bool interrupted = false;  ///< a stop signal reached a rank: the loop ended early, on every rank
  std::vector<double> times, phase_times, losses;  ///< [iterations], [iterations][4], [iterations]
  std::vector<double> exposed;                     ///< [iterations], on more than one rank
  int64_t host_peak = -1, device_peak = 0;
  CpuUsage cpu;       ///< over the timed iterations
  Energy cpu_energy;  ///< of the host's CPU packages, read by the host's first rank only
  GpuUsage gpu;
};

namespace {

/// DLSCALE_TEST_SLEEP_RANK (tests only, docs/running.md): the rank that sleeps after each timed
/// step for as long as the step took, idle half of it, to check the utilisation arithmetic on
/// real processes; -1 when unset.
int test_sleep_rank() {
  const char* v = std::getenv("DLSCALE_TEST_SLEEP_RANK");
  return v != nullptr && *v != '\0' ? std::atoi(v) : -1;
}

/// DLSCALE_TEST_SKIP_REDUCTION_RANK (tests only, docs/running.md): the rank that leaves out the
/// first gradient reduction of the run through a driver's reducer (NCCL), so that its peers'
/// reduction waits for it as for a hung peer; -1 when unset.
int test_skip_reduction_rank() {
  const char* v = std::getenv("DLSCALE_TEST_SKIP_REDUCTION_RANK");
  return v != nullptr && *v != '\0' ? std::atoi(v) : -1;
}

/// A driver's reducer that leaves out one average() unless `skipped` says it was done already
/// (DLSCALE_TEST_SKIP_REDUCTION_RANK).
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

 private:
  GradientReducer& reducer_;
  bool& skipped_;
};

/// Seconds a gradient reduction's collective set-up (NCCL's) may take when the case has no
/// shorter --case-timeout: a rank whose set-up failed waits this long at most for the others.
constexpr double kReducerSetUpSeconds = 300;

}  // namespace

Runner::Setup Runner::prepare(const CaseSpec& spec, MPI_Comm comm) {
  Setup s;
  s.driver = drivers_.find(spec.driver);
  s.workload = make_workload(spec.workload);
  s.device = spec.device;
  s.threads = spec.threads > 0 ? spec.threads : mpi_.default_threads();
  const Driver& driver = *s.driver;
  const Precision precision = spec.precision;
  const int ranks = spec.ranks;
  if (s.device == DeviceType::kCuda) {
    s.gpu = gpu_index_for(mpi_.local_rank(), driver.device_count(DeviceType::kCuda, nullptr));
  }
  Support support = driver.device_available(s.device);
  if (support.ok) support = driver.supports(s.workload, s.device);
  if (support.ok) support = precision_support(driver, s.workload, s.device, precision, spec.allow_emulation);
  if (support.ok) support = driver.supports_denormals(s.device, spec.denormals);
  // A driver's own reduction comes first, before the model takes the device's memory. The
  // shared-GPU check and the reducer may be collective, so the ranks agree on the case before
  // either: a rank refused above must not skip a collective the others enter.
  s.outcome = agree(comm, Outcome::from(support));
  if (s.device == DeviceType::kCuda) {
    if (s.outcome.ok() && ranks > 1 &&
        gpus_shared(comm, mpi_.host(), driver.describe_device(DeviceType::kCuda, s.gpu))) {
      // gpus_shared answers the same on every rank
      s.outcome = {Status::kUnsupported,
                   "two ranks of this case would share a GPU, which NCCL refuses (one GPU per rank)"};
    }
  }
  // Agreed on every rank already: going on would only prefix the message a second time.
  if (!s.outcome.ok()) return s;
  // A rank whose set-up of the reduction fails waits in the agreement below while the others may
  // still be in the collective set-up (NCCL's, polled): they give up at its deadline, which
  // --case-timeout sets and kReducerSetUpSeconds bounds, and every rank records the failure.
  const double set_up_limit =
      spec.case_timeout > 0 ? std::min(spec.case_timeout, kReducerSetUpSeconds) : kReducerSetUpSeconds;
  Outcome reduction;
  try {
    const MpiRankGroup group(comm);
    s.reducer = driver.make_reducer(s.device, s.gpu, group, deadline_after(set_up_limit));
  } catch (...) {
    reduction = outcome_of(std::current_exception());
    reduction.message =
        fmt::format("set-up of the gradient reduction (given {} s): {}", set_up_limit, reduction.message);
  }
  s.outcome = agree(comm, reduction);
  if (!s.outcome.ok()) {
    s.reducer.reset();
    return s;
  }
  // The rank within the case (its placement may take any of the job's ranks): it picks the
  // rank's data and dropout seed, so that a case trains the same whatever ranks it ran on.
  int case_rank = 0;
  DLSCALE_CHECK_MPI(MPI_Comm_rank(comm, &case_rank));
  try {
    // Each rank draws its own dropout masks, as data-parallel training does.
    const uint64_t rank_seed = spec.seed + 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(case_rank);
    s.model = driver.create(s.workload, {s.device, s.gpu, s.threads, rank_seed, precision, spec.denormals});
    s.model->load_parameters(canonical_parameters(s.workload, spec.seed));
    if (spec.data == "synthetic") {
      s.model->set_batch(synthetic_batch(s.workload, spec.batch_per_rank(), spec.seed, case_rank));
    } else {
      std::shared_ptr<const Dataset>& cached = datasets_[spec.data];
      if (!cached) cached = open_dataset(spec.data);
      s.dataset = cached;
      if (spec.mode == RunMode::kAccuracy) {
        const std::string test_spec = test_dataset_spec(spec.data);
        std::shared_ptr<const Dataset>& test = datasets_[test_spec];
        if (!test) test = open_dataset(test_spec);
        s.test = test;
      }
      // The first batch now, so that building the network (and running out of memory doing
      // so) happens here rather than inside the timed loop.
      s.model->set_batch(s.dataset->batch(int64_t{case_rank} * spec.batch_per_rank(), spec.batch_per_rank()));
    }
    if (s.model->grad_buffer().on_device && !s.reducer && ranks > 1) {
      // The harness's MPI all-reduce reads host memory only; one rank needs no reduction.
      s.outcome = {Status::kUnsupported,
                   fmt::format("the {} driver keeps gradients in device memory and gives no reducer for them "
                               "(drivers/driver.h), so it runs on one rank only",
                               driver.name())};
    }
    if (s.outcome.ok() && s.reducer) s.overlap = s.reducer->bind(*s.model, spec.bucket_mb);
  } catch (...) {
    s.outcome = outcome_of(std::current_exception());
  }
  s.outcome = agree(comm, s.outcome);
  if (!s.outcome.ok()) {
    s.model.reset();
    return s;
  }
  s.timer = s.model->make_step_timer();
  if (!s.timer) s.timer = make_host_step_timer(*s.model);
  if (!s.reducer && spec.bucket_mb > 0 && ranks > 1) {
    s.buckets = std::make_unique<BucketedAllreduce>(s.model->grad_buffer(), comm, spec.bucket_mb);
    s.overlap = s.buckets->follow(*s.model);
  }
  return s;
}

Runner::Samples Runner::measure(const CaseSpec& spec, MPI_Comm comm, Setup& s) {
  Samples out;
  Model& model = *s.model;
  const Optimizer opt = spec.make_optimizer();
  // With a real dataset every iteration trains on the next global batch, each rank on its own
  // slice of it; the copy in happens before the step's barrier, outside the timed region.
  int case_rank = 0;
  DLSCALE_CHECK_MPI(MPI_Comm_rank(comm, &case_rank));
  int64_t next_sample = int64_t{case_rank} * spec.batch_per_rank();
  const auto next_batch = [&] {
    if (!s.dataset) return;
    model.set_batch(s.dataset->batch(next_sample, spec.batch_per_rank()));
    next_sample += spec.global_batch();
  };
  GradientReducer* reducer = s.reducer.get();
  std::optional<SkipsOneReduction> skipping;
  if (reducer != nullptr && mpi_.rank() == test_skip_reduction_rank()) {
    reducer = &skipping.emplace(*reducer, test_reduction_skipped_);
  }
  reset_memory_mark(progress_);
  // Each step, warm-up included, ends with one all-reduce of the loss and of whether the step
  // failed on this rank: a failure anywhere (out of memory in any iteration, a library error, a
  // non-finite loss, a dataset read, a device collective past the case's deadline) ends the case
  // on every rank, recorded with its status, and the sweep goes on. Only a lost rank or a broken
  // communicator ends the job.
  const Clock::time_point started = Clock::now();
  const Deadline deadline = deadline_after(spec.case_timeout);
  const auto step = [&] {
    return training_step(model, comm, opt, spec.phases, s.buckets.get(), s.timer.get(), reducer, deadline);
  };
  const auto guarded_step = [&](int iteration, bool timed) {
    Outcome failed;
    StepTimes t;
    double loss = 0;
    // Every rank goes through the barrier and the step's collectives whatever failed before
    // them on it (the step then trains on the previous batch, and its result is discarded).
    try {
      next_batch();
    } catch (...) {
      failed = outcome_of(std::current_exception());
    }
    DLSCALE_CHECK_MPI(MPI_Barrier(comm));  // every rank starts the step together
    try {
      t = step();
      loss = model.loss();
      if (!std::isfinite(loss) && failed.ok()) failed = {Status::kError, fmt::format("the loss is {}", loss)};
      if (spec.case_timeout > 0 && failed.ok() && seconds_between(started, Clock::now()) > spec.case_timeout) {
        failed = {Status::kTimeout, fmt::format("still training after --case-timeout {} s", spec.case_timeout)};
      }
    } catch (...) {
      if (failed.ok()) failed = outcome_of(std::current_exception());
    }
    if (!failed.ok()) {
      failed.message = fmt::format("{} {}: {}", timed ? "iteration" : "warm-up step", iteration, failed.message);
    }
    double mine[3] = {failed.ok() ? loss / spec.ranks : 0.0, failed.ok() ? 0.0 : 1.0, stop_signal() != 0 ? 1.0 : 0.0};
    double sum[3] = {0, 0, 0};
    DLSCALE_CHECK_MPI(MPI_Allreduce(mine, sum, 3, MPI_DOUBLE, MPI_SUM, comm));
    if (sum[1] > 0) out.outcome = agree(comm, failed);
    out.interrupted = sum[2] > 0;
    return std::make_pair(t, sum[0]);
  };
  // The meters of the timed region: opened before it, read at its two ends only (the GPU's
  // sampling thread wakes every 100 ms), on every rank. The packages' energy counters are the
  // host's: its first rank reads them, so that the ranks' energies add up.
  std::optional<RaplMeter> rapl;
  if (mpi_.local_rank() == 0) rapl.emplace();
  std::optional<GpuMonitor> gpu;
  if (s.device == DeviceType::kCuda) {
    gpu.emplace(process_nvml(), pci_bus_id_of(s.driver->describe_device(DeviceType::kCuda, s.gpu)));
  } else {
    gpu.emplace("a CPU case has no GPU");
  }
  CpuMeter cpu;
  const int sleeper = test_sleep_rank();
  double slept = 0;
  try {
    for (int i = 0; i < spec.warmup && out.outcome.ok() && !out.interrupted; ++i) {
      const auto [t, loss] = guarded_step(i + 1, false);
      if (out.outcome.ok()) progress_.iteration("warm-up", i + 1, spec.warmup, t.total);
    }
    // A case that trains until its --case-timeout may ask for billions of steps: reserve what a
    // case usually records, not that.
    out.times.reserve(static_cast<size_t>(std::min(spec.iterations, 1 << 16)));
    if (rapl) rapl->start();
    gpu->start();
    cpu.start();
    for (int i = 0; i < spec.iterations && out.outcome.ok() && !out.interrupted; ++i) {
      const auto [t, mean_loss] = guarded_step(i + 1, true);
      if (mpi_.rank() == sleeper) {
        usleep(static_cast<useconds_t>(t.total * 1e6));
        slept += t.total;
      }
      if (!out.outcome.ok() || out.interrupted) break;
      out.times.push_back(t.total);
      if (spec.ranks > 1) out.exposed.push_back(t.exposed_allreduce);
      if (spec.phases) out.phase_times.insert(out.phase_times.end(), t.phase, t.phase + kPhaseCount);
      out.losses.push_back(mean_loss);
      progress_.iteration("iteration", i + 1, spec.iterations, t.total);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "dlscale: rank {}: case {} failed while training and MPI cannot recover: {}\n", mpi_.rank(),
               spec.command(), e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  out.cpu = cpu.stop();
  out.gpu = gpu->stop();
  out.cpu_energy = rapl ? rapl->stop()
                        : Energy{kNotMeasured, fmt::format("unavailable: the CPU packages of host {} are read by its "
                                                           "first rank (local rank 0)",
                                                           mpi_.host())};
  if (mpi_.rank() == sleeper) {
    fmt::print(stderr, "dlscale: test: rank {} slept {:.6f} s of its {:.6f} s timed region (DLSCALE_TEST_SLEEP_RANK)\n",
               mpi_.rank(), slept, out.cpu.wall_s);
  }
  out.host_peak = peak_rss_bytes();
  out.device_peak = model.memory().device_peak_bytes;
  return out;
}

namespace {

/// Why a case's achieved rate can exceed its measured peak (a share above 1), else "". The peak
/// is measured on every rank of a job at once (suite/meters/peak.cpp; this job's, or a --peak FILE's):
/// a case on fewer ranks has more of the node's cores, caches and memory bandwidth than each
/// rank had then. Otherwise the analytic FLOP count is what is off: a layer outside the measured
/// product (an LSTM's gates, convolutions by another algorithm) or fewer multiplications than
/// counted.
std::string above_peak_reason(const CaseSpec& spec, int measured_ranks, double share) {
  if (!(share > 1)) return "";
  if (spec.ranks < measured_ranks) {
    return fmt::format("the peak was measured with {} ranks active at once; this case ran on {}", measured_ranks,
                       spec.ranks);
  }
  return "the analytic FLOP count is more than this driver computes as measured matrix products: a layer computed "
         "another way, or fewer multiplications than counted";
}

/// What each rank's meters give run_on's gather: CPU (cpu_s, wall_s), energy, GPU (4), then the
/// CPU's detail (user_s, system_s, minor and major faults, run-queue wait and run time, steal).
constexpr int kUse = 15;

/// /cases/NNNN/utilisation from every rank's meters ([ranks][kUse] as gathered in run_on), and the
/// summary's utilisation, share of peak and energy (docs/metrics.md, "Utilisation and energy").
GroupRecord utilisation_group(const CaseSpec& spec, int threads, const PeakLookup& peaks,
                              const std::vector<double>& use, const std::vector<std::string>& cpu_sources,
                              const std::vector<std::string>& gpu_sources, Attrs& summary) {
  const auto ranks = static_cast<size_t>(spec.ranks);
  Column rank = Column::of_ints("rank", {}), cpu_s = Column::of_doubles("cpu_time_s", {}),
         wall_s = Column::of_doubles("wall_s", {}), util = Column::of_doubles("cpu_utilisation", {}),
         busy = Column::of_doubles("busy_cores", {}), cpu_j = Column::of_doubles("cpu_energy_j", {}),
         cpu_src = Column::of_strings("cpu_energy_source", {}), gpu_j = Column::of_doubles("gpu_energy_j", {}),
         gpu_util = Column::of_doubles("gpu_utilisation_pct", {}),
         gpu_clock = Column::of_doubles("gpu_sm_clock_mhz", {}), gpu_power = Column::of_doubles("gpu_power_w", {}),
         gpu_n = Column::of_ints("gpu_samples", {}), gpu_src = Column::of_strings("gpu_source", {}),
         user_s = Column::of_doubles("user_s", {}), system_s = Column::of_doubles("system_s", {}),
         minor = Column::of_doubles("minor_faults", {}), major = Column::of_doubles("major_faults", {}),
         wait_s = Column::of_doubles("run_wait_s", {}), run_s = Column::of_doubles("run_s", {}),
         steal = Column::of_doubles("steal_share", {}), contended = Column::of_ints("contended", {});
  double util_sum = 0, busy_sum = 0, cpu_energy = 0, gpu_energy = 0, system_sum = 0, faults_sum = 0, major_sum = 0;
  double user_s_sum = 0, system_s_sum = 0;
  double wait_max = kNotMeasured, steal_max = kNotMeasured;
  bool any_cpu_energy = false, all_gpu_energy = true, any_contended = false;
  const double steps = static_cast<double>(spec.iterations);
  // The largest of the finite values; NaN when none is (a kernel without schedstat or steal).
  const auto worst = [](double so_far, double v) { return std::isfinite(v) && !(v <= so_far) ? v : so_far; };
  for (size_t r = 0; r < ranks; ++r) {
    const double* u = &use[r * kUse];
    CpuUsage c;
    c.cpu_s = u[0], c.wall_s = u[1], c.user_s = u[8], c.system_s = u[9], c.minor_faults = u[10], c.major_faults = u[11],
    c.run_wait_s = u[12], c.run_s = u[13], c.steal_share = u[14];
    user_s.doubles.push_back(c.user_s);
    system_s.doubles.push_back(c.system_s);
    minor.doubles.push_back(c.minor_faults);
    major.doubles.push_back(c.major_faults);
    wait_s.doubles.push_back(c.run_wait_s);
    run_s.doubles.push_back(c.run_s);
    steal.doubles.push_back(c.steal_share);
    contended.ints.push_back(c.contended() ? 1 : 0);
    any_contended = any_contended || c.contended();
    system_sum += c.system_share();
    user_s_sum += c.user_s, system_s_sum += c.system_s;
    faults_sum += (c.minor_faults + c.major_faults) / steps;
    major_sum += c.major_faults / steps;
    wait_max = worst(wait_max, c.wait_share());
    steal_max = worst(steal_max, c.steal_share);
    rank.ints.push_back(static_cast<int64_t>(r));
    cpu_s.doubles.push_back(c.cpu_s);
    wall_s.doubles.push_back(c.wall_s);
    util.doubles.push_back(c.utilisation(threads));
    busy.doubles.push_back(c.busy_cores());
    util_sum += c.utilisation(threads);
    busy_sum += c.busy_cores();
    cpu_j.doubles.push_back(u[2]);
    cpu_src.strings.push_back(cpu_sources[r]);
    // The host's first rank reads its packages; the others record NaN and why.
    if (std::isfinite(u[2])) cpu_energy += u[2], any_cpu_energy = true;
    gpu_j.doubles.push_back(u[3]);
    if (std::isfinite(u[3])) gpu_energy += u[3];
    all_gpu_energy = all_gpu_energy && std::isfinite(u[3]);
    gpu_util.doubles.push_back(u[4]);
    gpu_clock.doubles.push_back(u[5]);
    gpu_power.doubles.push_back(u[6]);
    gpu_n.ints.push_back(static_cast<int64_t>(u[7]));
    gpu_src.strings.push_back(gpu_sources[r]);
  }
  GroupRecord g;
  g.tables.emplace_back(
      "per_rank", Table{{rank,  cpu_s,   wall_s, util,     busy,  cpu_j, cpu_src, gpu_j, gpu_util, gpu_clock, gpu_power,
                         gpu_n, gpu_src, user_s, system_s, minor, major, wait_s,  run_s, steal,    contended}});
  // A case's energy is its device's: the CPU packages' for a CPU case, the GPUs' for a GPU case.
  const bool gpu_case = spec.device == DeviceType::kCuda;
  const double energy =
      gpu_case ? (all_gpu_energy ? gpu_energy : kNotMeasured) : (any_cpu_energy ? cpu_energy : kNotMeasured);
  const std::string energy_note =
      gpu_case ? (all_gpu_energy ? "the GPUs' (NVML), summed over ranks" : gpu_sources.front())
               : (any_cpu_energy ? "the CPU packages' (powercap), summed over hosts: " + cpu_sources.front()
                                 : cpu_sources.front());
  std::string peak_note;
  const double peak = peaks.gemm_sum({spec.driver, spec.device, spec.precision, threads}, spec.ranks, &peak_note);
  g.attrs = {{"threads", int64_t{threads}}, {"peak", peak_note}, {"energy", energy_note}};
  const double achieved = std::get<double>(attr(summary, "achieved_flops"));
  summary.emplace_back("cpu_utilisation", util_sum / static_cast<double>(ranks));
  summary.emplace_back("busy_cores", busy_sum / static_cast<double>(ranks));
  summary.emplace_back("user_s_per_step", user_s_sum / static_cast<double>(ranks) / steps);
  summary.emplace_back("system_s_per_step", system_s_sum / static_cast<double>(ranks) / steps);
  summary.emplace_back("system_share", system_sum / static_cast<double>(ranks));
  summary.emplace_back("page_faults_per_step", faults_sum / static_cast<double>(ranks));
  summary.emplace_back("major_faults_per_step", major_sum / static_cast<double>(ranks));
  summary.emplace_back("cpu_wait_share", wait_max);
  summary.emplace_back("cpu_steal_share", steal_max);
  summary.emplace_back("contended", int64_t{any_contended ? 1 : 0});
  summary.emplace_back("peak_flops", peak);
  summary.emplace_back("peak_share", achieved / peak);
  summary.emplace_back("peak_share_note", above_peak_reason(spec, peaks.measured_ranks(), achieved / peak));
  summary.emplace_back("energy_j_per_step", energy / steps);
  summary.emplace_back("energy_j_per_sample", energy / (steps * static_cast<double>(spec.global_batch())));
  return g;
}

}  // namespace

CaseOutcome Runner::run_on(const CaseSpec& spec, MPI_Comm comm, int index, int total) {
  const Clock::time_point wall_start = Clock::now();
  const int ranks = spec.ranks;
  const bool root = mpi_.rank() == 0;
  const int threads = spec.threads > 0 ? spec.threads : mpi_.default_threads();
  progress_.case_started(index, total,
                         fmt::format("{} {} {} b{}/rank t{}", spec.workload, spec.driver, device_name(spec.device),
                                     spec.batch_per_rank(), threads),
                         spec.command());

  // Describe: what the case is, before anything can fail.
  CaseOutcome outcome;
  CaseRecord& rec = outcome.record;
  rec.ranks = ranks;
  Attrs& a = rec.attrs;
  const Workload workload = make_workload(spec.workload);
  const int64_t params = parameter_count(workload);
  const double train_flops = flops_per_sample(workload).train() * static_cast<double>(spec.global_batch());
  add(a, "workload", spec.workload);
  add(a, "driver", spec.driver);
  add(a, "device_type", std::string(device_name(spec.device)));
  add(a, "precision", std::string(precision_name(spec.precision)));
  add(a, "denormals", std::string(denormals_name(spec.denormals)));
  add(a, "isa", describe_isa(drivers_.find(spec.driver), spec));
  add(a, "scaling", std::string(scaling_name(spec.scaling)));
  add(a, "ranks", int64_t{ranks});
  add(a, "participants", format_participants(placed_.world));
  add(a, "placement", std::string(placement_name(spec.placement)));
  add(a, "hosts", int64_t{placed_.hosts});
  add(a, "batch_per_rank", spec.batch_per_rank());
  add(a, "global_batch", spec.global_batch());
  add(a, "threads", int64_t{threads});
  // An accuracy case times epochs, not steps: no warm-up and no timed iterations.
  const bool accuracy = spec.mode == RunMode::kAccuracy;
  add(a, "warmup", int64_t{accuracy ? 0 : spec.warmup});
  add(a, "iterations", int64_t{accuracy ? 0 : spec.iterations});
  add(a, "seed", static_cast<int64_t>(spec.seed));
  add(a, "params", params);
  add(a, "train_flops_per_step", train_flops);
  add(a, "grad_bytes", params * int64_t{4});
  add(a, "phases", int64_t{spec.phases ? 1 : 0});
  add(a, "data", spec.data);
  add(a, "bucket_mb", spec.bucket_mb);
  add(a, "case_key", spec.command());
  add(a, "started_utc", utc_now());
  add(a, "mode", std::string(run_mode_name(spec.mode)));
  add(a, "optimizer", std::string(optimizer_name(spec.optimizer)));
  add(a, "learning_rate", spec.learning_rate);

  // Prepare and measure. A case that outlives its --case-timeout ends at the next step boundary
  // (recorded `timeout`); one that reaches no step boundary long after it (a hung collective, a
  // lost rank) cannot be interrupted by MPI, so the watchdog ends the process, saying why.
  std::optional<Watchdog> watchdog;
  if (spec.case_timeout > 0) {
    const double limit = 2 * spec.case_timeout + 30;
    watchdog.emplace(limit, [this, &spec, limit] {
      fmt::print(stderr,
                 "dlscale: rank {} ({}): case {} is still running {:.0f} s after it started, past its --case-timeout "
                 "{} s: it is stuck where MPI cannot interrupt it (a hung collective or a lost rank). {}\n",
                 mpi_.rank(), mpi_.host(), spec.command(), limit, spec.case_timeout, stop_hint_);
      std::fflush(stderr);
      std::_Exit(4);
    });
  }
  Setup setup = prepare(spec, comm);
  if (accuracy) return finish_accuracy(spec, comm, setup, std::move(outcome), wall_start);
  Samples samples;
  if (setup.outcome.ok()) samples = measure(spec, comm, setup);
  if (samples.interrupted) {  // every rank of the case knows (the step's all-reduce)
    outcome.interrupted = true;
    return outcome;
  }
  // Agreed on every rank: set-up's, else the training loop's.
  Outcome result = setup.outcome.ok() ? samples.outcome : setup.outcome;

  // Gather every rank's samples on rank 0 (collective).
  const int iters = result.ok() ? spec.iterations : 0;
  rec.iterations = iters;
  if (root) rec.iter_time_s.resize(static_cast<size_t>(ranks) * static_cast<size_t>(iters));
  DLSCALE_CHECK_MPI(
      MPI_Gather(samples.times.data(), iters, MPI_DOUBLE, rec.iter_time_s.data(), iters, MPI_DOUBLE, 0, comm));
  if (spec.phases && iters > 0) {
    if (root) rec.phase_time_s.resize(static_cast<size_t>(ranks) * static_cast<size_t>(iters) * kPhaseCount);
    DLSCALE_CHECK_MPI(MPI_Gather(samples.phase_times.data(), iters * kPhaseCount, MPI_DOUBLE, rec.phase_time_s.data(),
                                 iters * kPhaseCount, MPI_DOUBLE, 0, comm));
  }
  if (ranks > 1 && iters > 0) {
    if (root) rec.exposed_allreduce_s.resize(static_cast<size_t>(ranks) * static_cast<size_t>(iters));
    DLSCALE_CHECK_MPI(MPI_Gather(samples.exposed.data(), iters, MPI_DOUBLE, rec.exposed_allreduce_s.data(), iters,
                                 MPI_DOUBLE, 0, comm));
  }
  rec.loss = samples.losses;
  rec.memory = gather_memory(comm, ranks, samples.host_peak, samples.device_peak);
  // Utilisation over the timed region, every rank's (collective, whatever the outcome).
  const double use_local[kUse] = {samples.cpu.cpu_s,           samples.cpu.wall_s,
                                  samples.cpu_energy.joules,   samples.gpu.energy_j,
                                  samples.gpu.utilisation_pct, samples.gpu.sm_clock_mhz,
                                  samples.gpu.power_w,         static_cast<double>(samples.gpu.samples),
                                  samples.cpu.user_s,          samples.cpu.system_s,
                                  samples.cpu.minor_faults,    samples.cpu.major_faults,
                                  samples.cpu.run_wait_s,      samples.cpu.run_s,
                                  samples.cpu.steal_share};
  std::vector<double> use_all(root ? static_cast<size_t>(ranks) * kUse : 0);
  DLSCALE_CHECK_MPI(MPI_Gather(use_local, kUse, MPI_DOUBLE, use_all.data(), kUse, MPI_DOUBLE, 0, comm));
  const std::vector<std::string> cpu_energy_sources = gather_strings(comm, samples.cpu_energy.source);
  const std::vector<std::string> gpu_sources = gather_strings(comm, samples.gpu.source);
  // The all-reduce microbenchmark at this case's gradient size, for the phase breakdown and the
  // projection, through the same reduction the steps used (a driver's own on its device's
  // memory, else MPI on host memory); collective, so it runs before rank 0 goes its own way.
  std::optional<AllreduceResult> microbenchmark, within_host;
  if (result.ok() && spec.phases && ranks > 1) {
    AllreduceOptions options;
    // Powers of two up to the gradient size, for the fit; starting at most at a quarter of it
    // so that even a tiny model gets at least two sizes.
    options.sizes_bytes = allreduce_sizes(std::min<int64_t>(1024, params), params * 4, {params * 4});
    options.warmup = 2;
    options.iterations = 5;
    std::unique_ptr<AllreduceTransport> transport;
    if (setup.reducer) {
      setup.model.reset();  // its memory is measured; the microbenchmark may need the room
      transport = setup.reducer->transport();
    }
    microbenchmark = run_allreduce_benchmark(comm, options, transport.get());
    // Across hosts the fit above is the network's; the case's ranks that share a host measure
    // their own links too (each host's at once: the groups are disjoint), so that the projection
    // has both. On host memory through MPI only: a driver's reducer spans the whole case.
    if (placed_.hosts > 1 && placed_.max_per_host > 1 && !setup.reducer) {
      MPI_Comm node = MPI_COMM_NULL;
      DLSCALE_CHECK_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
      const Communicator host_comm(node);
      within_host = run_allreduce_benchmark(host_comm.get(), options, nullptr);
    }
  }
  if (!root) return outcome;
  if (microbenchmark) {
    // The reduction the steps used returned wrong sums: the case's numbers cannot be trusted.
    int64_t wrong = 0;
    for (int64_t e : microbenchmark->errors) wrong += e;
    if (within_host) {
      for (int64_t e : within_host->errors) wrong += e;  // rank 0's host's (the others' go unread)
    }
    if (wrong > 0) {
      result = {Status::kError,
                fmt::format("the all-reduce microbenchmark of this case found {} wrong elements (/allreduce, errors)",
                            wrong)};
    }
  }

  // Summarise and record (rank 0).
  add(a, "overlap", int64_t{setup.overlap ? 1 : 0});
  add(a, "progress_thread", int64_t{setup.buckets && setup.buckets->progress_thread() ? 1 : 0});
  add(a, "status", std::string(status_name(result.status)));
  add(a, "message", result.message);
  if (result.ok()) {
    const StepStats s = step_stats(rec.iter_time_s, ranks, iters);
    Attrs& m = rec.summary;
    add(m, "step_median_s", s.median);
    add(m, "step_p05_s", s.p05);
    add(m, "step_p95_s", s.p95);
    add(m, "step_mean_s", s.mean);
    add(m, "step_std_s", s.std);
    add(m, "step_cv", s.cv);
    add(m, "ci95_low_s", s.ci95_low);
    add(m, "ci95_high_s", s.ci95_high);
    add(m, "ci_coverage", s.ci_coverage);
    add(m, "samples_per_s", static_cast<double>(spec.global_batch()) / s.median);
    add(m, "achieved_flops", train_flops / s.median);
    add(m, "straggler_ratio", s.straggler_ratio);
    if (!rec.exposed_allreduce_s.empty()) {
      add(m, "exposed_allreduce_median_s", median(slowest_rank(rec.exposed_allreduce_s, ranks, iters, 1, {0})));
    }
    if (spec.phases) {
      static const char* const kNames[kPhaseCount] = {"forward_median_s", "backward_median_s", "allreduce_median_s",
                                                      "update_median_s"};
      for (int p = 0; p < kPhaseCount; ++p) {
        add(m, kNames[p], median(slowest_rank(rec.phase_time_s, ranks, iters, kPhaseCount, {p})));
      }
    }
  }
  if (result.ok()) {
    outcome.utilisation =
        utilisation_group(spec, threads, peaks_, use_all, cpu_energy_sources, gpu_sources, rec.summary);
  }
  if (microbenchmark) {
    outcome.allreduce =
        allreduce_group(*microbenchmark, setup.device == DeviceType::kCuda ? "nccl" : "mpi", "", placed_.hosts);
    const double compute_s =
        median(slowest_rank(rec.phase_time_s, ranks, iters, kPhaseCount, {kForward, kBackward, kUpdate}));
    std::vector<int64_t> targets{1, 2, 3, 4, 5, 6, 7, 8};
    for (int64_t p = 16; p <= 1024; p *= 2) targets.push_back(p);
    const double grad_bytes = static_cast<double>(params) * 4;
    // A GPU rank's compute does not crowd a node's CPU cores: one "core" per rank, none shared.
    const bool gpu_case = setup.device == DeviceType::kCuda;
    // Packed, P up to the ranks this job has on a host stays on one host; spread, every P > 1
    // crosses hosts.
    const RingFit fit{microbenchmark->alpha_s, microbenchmark->beta_s_per_byte, ranks, placed_.hosts};
    ProjectionNetwork network;
    network.ranks_per_host = spec.placement == Placement::kSpread ? 1 : mpi_.local_size();
    (placed_.hosts > 1 ? network.between : network.within) = fit;
    if (within_host && within_host->ranks > 1) {
      network.within = {within_host->alpha_s, within_host->beta_s_per_byte, within_host->ranks, 1};
    }
    const Projection projection = project_steps(
        compute_s, ranks, spec.scaling == Scaling::kStrong, grad_bytes, network, gpu_case ? 1 : threads,
        gpu_case ? mpi_.local_size() : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)), mpi_.local_size(), targets);
    outcome.projection = projection_group(projection, fit, network, compute_s, grad_bytes, scaling_name(spec.scaling));
  }
  add(a, "wall_s", seconds_between(wall_start, Clock::now()));
  return outcome;
}

CaseOutcome Runner::finish_accuracy(const CaseSpec& spec, MPI_Comm comm, Setup& setup, CaseOutcome outcome,
                                    Clock::time_point wall_start) {
  AccuracyResult result;
  if (setup.outcome.ok()) {
    reset_memory_mark(progress_);
    try {
      result = run_accuracy(spec, setup.workload, comm,
                            {*setup.model, setup.timer.get(), setup.reducer.get(), setup.buckets.get()}, *setup.dataset,
                            *setup.test, progress_);
    } catch (const MpiError&) {
      throw;
    } catch (const std::exception& e) {
      // Outside any step (the loop's own failures are agreed in it): the ranks may be apart.
      fmt::print(stderr, "dlscale: rank {}: case {} failed while training and MPI cannot recover: {}\n", mpi_.rank(),
                 spec.command(), e.what());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  } else {
    result.outcome = setup.outcome;
  }
  if (result.interrupted) {  // every rank of the case knows (settled together)
    outcome.interrupted = true;
    return outcome;
  }
  CaseRecord& rec = outcome.record;
  rec.memory =
      gather_memory(comm, spec.ranks, peak_rss_bytes(), setup.model ? setup.model->memory().device_peak_bytes : 0);
  if (mpi_.rank() != 0) return outcome;
  Attrs& a = rec.attrs;
  add(a, "epochs", int64_t{spec.epochs});
  add(a, "validation_fraction", spec.validation);
  add(a, "target_accuracy", spec.target_accuracy);
  add(a, "repeats", int64_t{spec.repeats});
  add(a, "train_samples", result.train_samples);
  add(a, "validation_samples", result.validation_samples);
  add(a, "test_samples", result.test_samples);
  add(a, "test_data", test_dataset_spec(spec.data));
  add(a, "overlap", int64_t{setup.overlap ? 1 : 0});
  add(a, "progress_thread", int64_t{setup.buckets && setup.buckets->progress_thread() ? 1 : 0});
  add(a, "status", std::string(status_name(result.outcome.status)));
  add(a, "message", result.outcome.message);
  if (result.outcome.ok()) {
    rec.repeats = std::move(result.repeats);
    rec.accuracy_summary = std::move(result.summary);
  }
  add(a, "wall_s", seconds_between(wall_start, Clock::now()));
  return outcome;
}

std::string summary_line(const CaseRecord& r) {
  const auto str = [&](const char* n) { return std::get<std::string>(attr(r.attrs, n)); };
  const auto num = [&](const char* n) { return std::get<int64_t>(attr(r.attrs, n)); };
  const std::string isa = str("isa");
  std::string line =
      fmt::format("{:<10} {:<9} {:<4} {}{} {} {} P={} b={}/{} t={}", str("workload"), str("driver"), str("device_type"),
                  str("precision"), isa.empty() ? "" : "@" + isa, str("denormals"), str("scaling"), num("ranks"),
                  num("batch_per_rank"), num("global_batch"), num("threads"));
  if (str("status") != "ok") return line + fmt::format(" | {}: {}", str("status"), str("message"));
  if (r.accuracy()) return line + accuracy_summary_text(r);
  const auto sum = [&](const char* n) { return std::get<double>(attr(r.summary, n)); };
  line +=
      fmt::format(" | step {:.2f} ms [{:.2f}, {:.2f}] | {:.1f} samples/s | {:.2f} GFLOP/s", sum("step_median_s") * 1e3,
                  sum("ci95_low_s") * 1e3, sum("ci95_high_s") * 1e3, sum("samples_per_s"), sum("achieved_flops") / 1e9);
  if (!r.exposed_allreduce_s.empty()) {
    line += fmt::format(" | exposed all-reduce {:.2f} ms", sum("exposed_allreduce_median_s") * 1e3);
  }
  const double share = sum("peak_share"), joules = sum("energy_j_per_sample");
  line += fmt::format(" | cpu {:.2f} busy {:.2f} kernel {:.0f}% {:.3g} faults/step", sum("cpu_utilisation"),
                      sum("busy_cores"), sum("system_share") * 100, sum("page_faults_per_step"));
  if (std::get<int64_t>(attr(r.summary, "contended")) != 0) {
    const double wait = sum("cpu_wait_share"), steal = sum("cpu_steal_share");
    std::vector<std::string> why;
    if (std::isfinite(wait)) why.push_back(fmt::format("{:.0f}% of runnable time waiting for a core", wait * 100));
    if (std::isfinite(steal) && steal >= kContendedStealShare) {
      why.push_back(fmt::format("{:.0f}% stolen by the hypervisor", steal * 100));
    }
    line += fmt::format(" | contended: {}", fmt::join(why, ", "));
  }
  const std::string above = std::get<std::string>(attr(r.summary, "peak_share_note"));
  line += std::isfinite(share)
              ? fmt::format(" | {:.1f}% of peak{}", share * 100, above.empty() ? "" : " (above it: " + above + ")")
              : std::string(" | peak unavailable");
  line += std::isfinite(joules) ? fmt::format(" | {:.3g} J/sample", joules) : std::string(" | energy unavailable");
  return line + " | ok";
}

}  // namespace dlscale
