#include "suite/runner.h"

#include <unistd.h>
#include <algorithm>
#include <chrono>

#include <climits>
#include <cstdlib>
#include <memory>

#include <fmt/format.h>

#include "suite/allreduce_bench.h"
#include "suite/datasets.h"
#include "suite/errors.h"
#include "suite/gpu_binding.h"
#include "suite/gradient_allreduce.h"
#include "suite/host_memory.h"
#include "suite/provenance.h"
#include "suite/statistics.h"
#include "workloads/catalog.h"
#include "workloads/init.h"

namespace dlscale {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// Outcomes, ordered by how much they override others when ranks disagree.
enum class Status { kOk = 0, kUnsupported = 1, kOom = 2, kError = 3 };

const char* status_name(Status s) {
  switch (s) {
    case Status::kOk:
      return "ok";
    case Status::kUnsupported:
      return "unsupported";
    case Status::kOom:
      return "oom";
    case Status::kError:
      return "error";
  }
  return "error";
}

/// Agrees on the worst status over all ranks and on the message of the first rank that had it.
std::pair<Status, std::string> agree(MPI_Comm comm, Status mine, const std::string& message) {
  const auto worst = static_cast<Status>(allreduce_max(comm, static_cast<int>(mine)));
  if (worst == Status::kOk) return {worst, ""};
  const std::vector<std::string> all = gather_strings(comm, mine == worst ? message : std::string());
  std::string agreed;
  for (size_t r = 0; r < all.size(); ++r) {
    if (!all[r].empty()) {
      agreed = all.size() > 1 ? fmt::format("rank {}: {}", r, all[r]) : all[r];
      break;
    }
  }
  return {worst, agreed};
}

void add(Attrs& a, const char* name, AttrValue v) { a.emplace_back(name, std::move(v)); }

/// Median over iterations of the slowest rank's time in phase `p` ([ranks][iterations][4] input).
double phase_median(const std::vector<double>& phases, int ranks, int iterations, int p) {
  std::vector<double> slowest(static_cast<size_t>(iterations), 0.0);
  for (int r = 0; r < ranks; ++r) {
    for (int i = 0; i < iterations; ++i) {
      const double v =
          phases[(static_cast<size_t>(r) * static_cast<size_t>(iterations) + static_cast<size_t>(i)) * kPhaseCount +
                 static_cast<size_t>(p)];
      slowest[static_cast<size_t>(i)] = std::max(slowest[static_cast<size_t>(i)], v);
    }
  }
  return median(slowest);
}

}  // namespace

StepTimes training_step(Model& model, MPI_Comm comm, const Optimizer& opt, bool time_phases, BucketedAllreduce* buckets,
                        GpuStep* gpu) {
  StepTimes t;
  if (gpu != nullptr) {
    // Marks 0..4 bracket the phases; without phases only 0 and the last are read.
    gpu->mark(0);
    model.forward();
    if (time_phases) gpu->mark(1);
    model.backward();
    if (time_phases) gpu->mark(2);
    gpu->allreduce(model.grad_buffer());
    if (time_phases) gpu->mark(3);
    model.update(opt);
    const int last = time_phases ? 4 : 1;
    gpu->mark(last);
    t.total = gpu->seconds(0, last);
    if (time_phases) {
      for (int p = 0; p < kPhaseCount; ++p) t.phase[p] = gpu->seconds(p, p + 1);
    }
    return t;
  }
  // The all-reduce: one blocking call after backward, or buckets (started during backward when
  // the driver reports finished gradients) completed after it.
  const auto reduce = [&] {
    if (buckets != nullptr) {
      buckets->finish();
    } else {
      allreduce_gradients(model.grad_buffer(), comm);
    }
  };
  const Clock::time_point start = Clock::now();
  if (buckets != nullptr) buckets->start_step();
  if (!time_phases) {
    model.forward();
    model.backward();
    reduce();
    model.update(opt);
    model.synchronize();
    t.total = seconds_between(start, Clock::now());
    return t;
  }
  Clock::time_point mark = start;
  auto lap = [&](Phase p) {
    model.synchronize();
    const Clock::time_point now = Clock::now();
    t.phase[p] = seconds_between(mark, now);
    mark = now;
  };
  model.forward();
  lap(kForward);
  model.backward();
  lap(kBackward);
  reduce();
  lap(kAllreduce);
  model.update(opt);
  lap(kUpdate);
  t.total = seconds_between(start, mark);
  return t;
}

CaseOutcome Runner::run(const CaseSpec& spec, int index, int total) {
  // A case of P ranks runs on world ranks 0..P-1 (so world rank 0 always takes part and writes
  // the file); the others wait at the closing barrier. One job can so give a whole scaling curve.
  const bool member = mpi_.rank() < spec.ranks;
  MPI_Comm sub = MPI_COMM_NULL;
  DLSCALE_CHECK_MPI(MPI_Comm_split(mpi_.world(), member ? 0 : MPI_UNDEFINED, mpi_.rank(), &sub));
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

CaseOutcome Runner::run_on(const CaseSpec& spec, MPI_Comm comm, int index, int total) {
  const Clock::time_point wall_start = Clock::now();
  const int ranks = spec.ranks;
  const Workload workload = make_workload(spec.workload);
  const Driver& driver = *drivers_.find(spec.driver);
  const int threads = spec.threads > 0 ? spec.threads : mpi_.default_threads();
  const DeviceType device = spec.device == "cuda" ? DeviceType::kCuda : DeviceType::kCpu;
  const int64_t params = parameter_count(workload);
  const Optimizer opt;

  progress_.case_started(
      index, total,
      fmt::format("{} {} {} b{}/rank t{}", spec.workload, spec.driver, spec.device, spec.batch_per_rank(), threads),
      spec.command());

  CaseOutcome outcome;
  CaseRecord& rec = outcome.record;
  rec.ranks = ranks;
  Attrs& a = rec.attrs;
  add(a, "workload", spec.workload);
  add(a, "driver", spec.driver);
  add(a, "device_type", spec.device);
  add(a, "precision", spec.precision);
  add(a, "scaling", spec.scaling);
  add(a, "ranks", int64_t{ranks});
  add(a, "participants", ranks == 1 ? std::string("0") : fmt::format("0-{}", ranks - 1));
  add(a, "batch_per_rank", spec.batch_per_rank());
  add(a, "global_batch", spec.global_batch());
  add(a, "threads", int64_t{threads});
  add(a, "warmup", int64_t{spec.warmup});
  add(a, "iterations", int64_t{spec.iterations});
  add(a, "seed", static_cast<int64_t>(spec.seed));
  add(a, "params", params);
  const double train_flops = flops_per_sample(workload).train() * static_cast<double>(spec.global_batch());
  add(a, "train_flops_per_step", train_flops);
  add(a, "grad_bytes", params * int64_t{4});
  add(a, "phases", int64_t{spec.phases ? 1 : 0});
  add(a, "data", spec.data);
  add(a, "bucket_mb", spec.bucket_mb);
  add(a, "case_key", spec.command());
  add(a, "started_utc", utc_now());

  // Setup: every rank builds its model; failures are agreed on before any collective training.
  Status status = Status::kOk;
  std::string message;
  std::unique_ptr<Model> model;
  std::shared_ptr<const Dataset> dataset;
  const Precision precision = parse_precision(spec.precision);
  const int gpu = device == DeviceType::kCuda ? gpu_index_for(mpi_.local_rank()) : 0;
  Support support = driver.device_available(device);
  if (support.ok) support = driver.supports(workload, device);
  if (support.ok) support = driver.supports_precision(workload, device, precision);
  if (support.ok && device == DeviceType::kCuda && spec.bucket_mb > 0 && ranks > 1) {
    support = Support::no(
        "--bucket-mb: buckets are reduced with MPI on host memory; GPU gradients go through "
        "one NCCL all-reduce");
  }
  if (!support.ok) {
    status = Status::kUnsupported;
    message = support.reason;
  }
  // GPU cases: the NCCL communicator comes first, before the model takes the GPU's memory. The
  // shared-GPU check and the communicator are collective, so the ranks agree on the case before
  // either: a rank refused above must not skip a collective the others enter.
  std::unique_ptr<GpuStep> gpu_step;
  if (device == DeviceType::kCuda) {
    std::tie(status, message) = agree(comm, status, message);
    if (status == Status::kOk && ranks > 1 && gpus_shared(comm, mpi_.host(), gpu)) {
      status = Status::kUnsupported;  // gpus_shared answers the same on every rank
      message = "two ranks of this case would share a GPU, which NCCL refuses (one GPU per rank)";
    }
    if (status == Status::kOk) {
      try {
        gpu_step = make_gpu_step(comm, gpu);
      } catch (const std::exception& e) {
        // The other ranks may be inside NCCL's collective set-up, which has no way back.
        fmt::print(stderr, "dlscale: rank {}: case {}: GPU set-up failed: {}\n", mpi_.rank(), spec.command(), e.what());
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
    }
  }
  if (status == Status::kOk) {
    try {
      // Each rank draws its own dropout masks, as data-parallel training does.
      const uint64_t rank_seed = spec.seed + 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(mpi_.rank());
      model = driver.create(workload, {device, gpu, threads, rank_seed, precision});
      model->load_parameters(canonical_parameters(workload, spec.seed));
      if (spec.data == "synthetic") {
        model->set_batch(synthetic_batch(workload, spec.batch_per_rank(), spec.seed, mpi_.rank()));
      } else {
        std::shared_ptr<const Dataset>& cached = datasets_[spec.data];
        if (!cached) cached = open_dataset(spec.data);
        dataset = cached;
        // The first batch now, so that building the network (and running out of memory doing
        // so) happens here rather than inside the timed loop.
        model->set_batch(dataset->batch(int64_t{mpi_.rank()} * spec.batch_per_rank(), spec.batch_per_rank()));
      }
    } catch (const OutOfMemory& e) {
      status = Status::kOom;
      message = e.what();
    } catch (const std::bad_alloc&) {
      status = Status::kOom;
      message = "host allocation failed (std::bad_alloc)";
    } catch (const std::exception& e) {
      status = Status::kError;
      message = e.what();
    }
  }
  std::tie(status, message) = agree(comm, status, message);
  if (status == Status::kOk && gpu_step) gpu_step->bind(*model);

  std::vector<double> times, phase_times, losses;
  int64_t host_peak = -1, device_peak = 0;
  // With a real dataset every iteration trains on the next global batch, each rank on its own
  // slice of it; the copy in happens before the step's barrier, outside the timed region.
  int64_t next_sample = int64_t{mpi_.rank()} * spec.batch_per_rank();
  const auto next_batch = [&] {
    if (!dataset) return;
    model->set_batch(dataset->batch(next_sample, spec.batch_per_rank()));
    next_sample += spec.global_batch();
  };
  std::optional<BucketedAllreduce> buckets;
  bool overlap = false;
  if (status == Status::kOk && spec.bucket_mb > 0 && ranks > 1) {
    buckets.emplace(model->grad_buffer(), comm, spec.bucket_mb);
    overlap =
        model->set_gradient_ready_callback([&buckets](size_t first, size_t count) { buckets->ready(first, count); });
  }
  if (status == Status::kOk) {
    if (!reset_peak_rss()) {
      progress_.warn("cannot reset the peak-RSS mark: host_peak_rss_bytes is the process's lifetime peak");
    }
    double last = 0;
    // A failure inside the loop on one rank would leave the others blocked in a collective, so it
    // aborts the job; every case finished before it is already flushed to the file.
    try {
      for (int i = 0; i < spec.warmup; ++i) {
        next_batch();
        DLSCALE_CHECK_MPI(MPI_Barrier(comm));
        last = training_step(*model, comm, opt, spec.phases, buckets ? &*buckets : nullptr, gpu_step.get()).total;
        progress_.iteration("warm-up", i + 1, spec.warmup, last);
      }
      times.reserve(static_cast<size_t>(spec.iterations));
      for (int i = 0; i < spec.iterations; ++i) {
        next_batch();
        DLSCALE_CHECK_MPI(MPI_Barrier(comm));  // every rank starts the step together
        const StepTimes t =
            training_step(*model, comm, opt, spec.phases, buckets ? &*buckets : nullptr, gpu_step.get());
        times.push_back(t.total);
        if (spec.phases) phase_times.insert(phase_times.end(), t.phase, t.phase + kPhaseCount);
        double loss = model->loss() / ranks, mean_loss = 0;
        DLSCALE_CHECK_MPI(MPI_Allreduce(&loss, &mean_loss, 1, MPI_DOUBLE, MPI_SUM, comm));
        losses.push_back(mean_loss);
        progress_.iteration("iteration", i + 1, spec.iterations, t.total);
      }
    } catch (const std::exception& e) {
      fmt::print(stderr, "dlscale: rank {}: case {} failed while training: {}\n", mpi_.rank(), spec.command(),
                 e.what());
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    host_peak = peak_rss_bytes();
    device_peak = model->memory().device_peak_bytes;
  }

  // Gather every rank's samples on rank 0.
  const int iters = status == Status::kOk ? spec.iterations : 0;
  rec.iterations = iters;
  const bool root = mpi_.rank() == 0;
  if (root) rec.iter_time_s.resize(static_cast<size_t>(ranks) * static_cast<size_t>(iters));
  DLSCALE_CHECK_MPI(MPI_Gather(times.data(), iters, MPI_DOUBLE, rec.iter_time_s.data(), iters, MPI_DOUBLE, 0, comm));
  if (spec.phases && iters > 0) {
    if (root) rec.phase_time_s.resize(static_cast<size_t>(ranks) * static_cast<size_t>(iters) * kPhaseCount);
    DLSCALE_CHECK_MPI(MPI_Gather(phase_times.data(), iters * kPhaseCount, MPI_DOUBLE, rec.phase_time_s.data(),
                                 iters * kPhaseCount, MPI_DOUBLE, 0, comm));
  }
  rec.loss = losses;
  const int64_t mem_local[2] = {host_peak, device_peak};
  std::vector<int64_t> mem_all(root ? static_cast<size_t>(ranks) * 2 : 0);
  DLSCALE_CHECK_MPI(MPI_Gather(mem_local, 2, MPI_INT64_T, mem_all.data(), 2, MPI_INT64_T, 0, comm));
  // The all-reduce microbenchmark at this case's gradient size, for the phase breakdown and the
  // projection; collective over the case's ranks, so it runs before rank 0 goes its own way.
  std::optional<AllreduceResult> microbenchmark;
  // GPU cases measure NCCL on GPU buffers, as their steps reduce.
  if (status == Status::kOk && spec.phases && ranks > 1) {
    AllreduceOptions options;
    // Powers of two up to the gradient size, for the fit; starting at most at a quarter of it
    // so that even a tiny model gets at least two sizes.
    options.sizes_bytes = allreduce_sizes(std::min<int64_t>(1024, params), params * 4, {params * 4});
    options.warmup = 2;
    options.iterations = 5;
    std::unique_ptr<AllreduceTransport> nccl;
    if (gpu_step) {
      model.reset();  // its memory is measured; the microbenchmark may need the room
      nccl = gpu_step->transport();
    }
    microbenchmark = run_allreduce_benchmark(comm, options, nccl.get());
  }
  if (!root) return outcome;

  Column host = Column::of_ints("host_peak_rss_bytes", {}), dev = Column::of_ints("device_peak_bytes", {});
  for (int r = 0; r < ranks; ++r) {
    host.ints.push_back(mem_all[static_cast<size_t>(r) * 2]);
    dev.ints.push_back(mem_all[static_cast<size_t>(r) * 2 + 1]);
  }
  rec.memory.columns = {host, dev};
  add(a, "overlap", int64_t{overlap ? 1 : 0});
  add(a, "status", std::string(status_name(status)));
  add(a, "message", message);
  if (status == Status::kOk) {
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
    if (spec.phases) {
      static const char* const kNames[kPhaseCount] = {"forward_median_s", "backward_median_s", "allreduce_median_s",
                                                      "update_median_s"};
      for (int p = 0; p < kPhaseCount; ++p) add(m, kNames[p], phase_median(rec.phase_time_s, ranks, iters, p));
    }
  }
  if (microbenchmark) {
    outcome.allreduce = allreduce_group(*microbenchmark, device == DeviceType::kCuda ? "nccl" : "mpi", "");
    std::vector<double> compute(static_cast<size_t>(iters), 0.0);
    for (int r = 0; r < ranks; ++r) {
      for (int i = 0; i < iters; ++i) {
        const double* p =
            &rec.phase_time_s[(static_cast<size_t>(r) * static_cast<size_t>(iters) + static_cast<size_t>(i)) *
                              kPhaseCount];
        compute[static_cast<size_t>(i)] =
            std::max(compute[static_cast<size_t>(i)], p[kForward] + p[kBackward] + p[kUpdate]);
      }
    }
    const double compute_s = median(compute);
    std::vector<int64_t> targets{1, 2, 3, 4, 5, 6, 7, 8};
    for (int64_t p = 16; p <= 1024; p *= 2) targets.push_back(p);
    const double grad_bytes = static_cast<double>(params) * 4;
    // A GPU rank's compute does not crowd a node's CPU cores: one "core" per rank, none shared.
    const bool gpu_case = device == DeviceType::kCuda;
    const Projection projection = project_steps(
        compute_s, ranks, spec.scaling == "strong", grad_bytes, microbenchmark->alpha_s,
        microbenchmark->beta_s_per_byte, gpu_case ? 1 : threads,
        gpu_case ? mpi_.local_size() : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)), mpi_.local_size(), targets);
    outcome.projection = projection_group(projection, microbenchmark->alpha_s, microbenchmark->beta_s_per_byte, ranks,
                                          compute_s, grad_bytes, spec.scaling);
  }
  add(a, "wall_s", seconds_between(wall_start, Clock::now()));
  return outcome;
}

std::string summary_line(const CaseRecord& r) {
  const auto str = [&](const char* n) { return std::get<std::string>(attr(r.attrs, n)); };
  const auto num = [&](const char* n) { return std::get<int64_t>(attr(r.attrs, n)); };
  std::string line = fmt::format("{:<10} {:<9} {:<4} {} {} P={} b={}/{} t={}", str("workload"), str("driver"),
                                 str("device_type"), str("precision"), str("scaling"), num("ranks"),
                                 num("batch_per_rank"), num("global_batch"), num("threads"));
  if (str("status") != "ok") return line + fmt::format(" | {}: {}", str("status"), str("message"));
  const auto sum = [&](const char* n) { return std::get<double>(attr(r.summary, n)); };
  return line + fmt::format(" | step {:.2f} ms [{:.2f}, {:.2f}] | {:.1f} samples/s | {:.2f} GFLOP/s | ok",
                            sum("step_median_s") * 1e3, sum("ci95_low_s") * 1e3, sum("ci95_high_s") * 1e3,
                            sum("samples_per_s"), sum("achieved_flops") / 1e9);
}

}  // namespace dlscale
