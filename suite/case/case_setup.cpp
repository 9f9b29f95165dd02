#include "suite/case/case_setup.h"

#include <algorithm>
#include <exception>

#include <fmt/format.h>

#include "suite/case/device_binding.h"
#include "suite/case/outcome.h"
#include "suite/case/training_step.h"
#include "suite/data/datasets.h"
#include "suite/errors.h"
#include "suite/meters/host_memory.h"
#include "suite/process/allocator.h"
#include "workloads/data/synthetic.h"
#include "workloads/init.h"

namespace dlscale {

std::shared_ptr<const Dataset> DatasetCache::get(const std::string& spec) {
  std::shared_ptr<const Dataset>& cached = sets_[spec];
  if (!cached) cached = open_dataset(spec);
  return cached;
}

namespace {

/// Seconds a gradient reduction's collective set-up (NCCL's) may take when the case has no
/// shorter --case-timeout: a rank whose set-up failed waits this long at most for the others.
constexpr double kReducerSetUpSeconds = 300;

/// Whether the driver can run the case on this rank's device (agreed), and for a GPU case on
/// more than one rank that no two ranks share a GPU.
Outcome check_support(const CaseContext& ctx, int gpu) {
  const Driver& driver = *ctx.c.driver;
  const CaseSpec& spec = ctx.c.spec;
  Support support = driver.device_available(spec.device);
  if (support.ok) support = driver.supports(ctx.c.workload, spec.device);
  if (support.ok) {
    support = precision_support(driver, ctx.c.workload, spec.device, spec.precision, spec.allow_emulation);
  }
  if (support.ok) support = driver.supports_denormals(spec.device, spec.denormals);
  // The shared-GPU check and the reducer may be collective, so the ranks agree on the case before
  // either: a rank refused above must not skip a collective the others enter.
  const Outcome agreed = agree(ctx.comm, Outcome::from(support));
  // gpus_shared answers the same on every rank.
  if (agreed.ok() && ctx.c.gpu() && spec.ranks > 1 &&
      gpus_shared(ctx.comm, ctx.mpi.host(), driver.describe_device(DeviceType::kCuda, gpu))) {
    return {Status::kUnsupported, "two ranks of this case would share a GPU, which NCCL refuses (one GPU per rank)"};
  }
  return agreed;
}

/// A driver's own reduction (NCCL), set up before the model takes the device's memory; agreed.
Outcome set_up_reduction(const CaseContext& ctx, PreparedCase& p) {
  // A rank whose set-up of the reduction fails waits in the agreement below while the others may
  // still be in the collective set-up (NCCL's, polled): they give up at its deadline, which
  // --case-timeout sets and kReducerSetUpSeconds bounds, and every rank records the failure.
  const double timeout = ctx.c.spec.case_timeout;
  const double limit = timeout > 0 ? std::min(timeout, kReducerSetUpSeconds) : kReducerSetUpSeconds;
  Outcome reduction;
  try {
    const MpiRankGroup group(ctx.comm);
    p.reducer = ctx.c.driver->make_reducer(ctx.c.spec.device, p.gpu, group, deadline_after(limit));
  } catch (...) {
    reduction = outcome_of(std::current_exception());
    reduction.message = fmt::format("set-up of the gradient reduction (given {} s): {}", limit, reduction.message);
  }
  const Outcome agreed = agree(ctx.comm, reduction);
  if (!agreed.ok()) p.reducer.reset();
  return agreed;
}

/// Whether the case's reduction settings fit the built model and the driver's reducer: ok, or the
/// first that does not (`unsupported`, saying why).
Outcome reduction_support(const CaseContext& ctx, const PreparedCase& p) {
  const CaseSpec& spec = ctx.c.spec;
  const Driver& driver = *ctx.c.driver;
  if (p.model->grad_buffer().on_device && !p.reducer && spec.ranks > 1) {
    // The harness's MPI all-reduce reads host memory only; one rank needs no reduction.
    return {Status::kUnsupported,
            fmt::format("the {} driver keeps gradients in device memory and gives no reducer for them "
                        "(drivers/driver.h), so it runs on one rank only",
                        driver.name())};
  }
  if (spec.grad_compression != GradCompression::kNone && p.reducer) {
    return {Status::kUnsupported,
            fmt::format("--grad-compression {}: the {} driver's own reducer sums gradients in float32 only; "
                        "compression is the harness's MPI all-reduce's",
                        grad_compression_name(spec.grad_compression), driver.name())};
  }
  if (spec.sharding != Sharding::kNone && (p.reducer || p.model->parameters().data == nullptr)) {
    return {Status::kUnsupported,
            fmt::format("--sharding {}: the {} driver keeps its parameters on its device, and a sharded "
                        "optimiser is the harness's MPI reduction's, over parameters in host memory",
                        sharding_name(spec.sharding), driver.name())};
  }
  if (spec.sharding != Sharding::kNone && spec.allreduce_hierarchy == Hierarchy::kHost) {
    return {Status::kUnsupported,
            fmt::format("--sharding {} with --allreduce-hierarchy host: a sharded optimiser reduce-scatters "
                        "its gradients round one flat ring",
                        sharding_name(spec.sharding))};
  }
  if (spec.allreduce_hierarchy == Hierarchy::kHost && p.reducer) {
    return {Status::kUnsupported,
            fmt::format("--allreduce-hierarchy host: the {} driver's own reducer chooses its algorithms; the "
                        "host-level all-reduce is the harness's MPI all-reduce's",
                        driver.name())};
  }
  if (spec.accumulate > 1 && (p.model->grad_buffer().on_device || p.reducer)) {
    return {Status::kUnsupported,
            fmt::format("gradient accumulation (--accumulate {}) sums the micro-batches' gradients in host "
                        "memory; the {} driver keeps them in device memory",
                        spec.accumulate, driver.name())};
  }
  return {};
}

/// The model with the canonical parameters and its first batch (so that building the network,
/// and running out of memory doing so, happens here rather than inside the timed loop); agreed.
Outcome build_model(const CaseContext& ctx, PreparedCase& p, DatasetCache& data) {
  const CaseSpec& spec = ctx.c.spec;
  const Driver& driver = *ctx.c.driver;
  Outcome built;
  try {
    // Each rank draws its own dropout masks, as data-parallel training does; the seed and the
    // data follow the case rank, so that a case trains the same whatever ranks it ran on.
    const uint64_t rank_seed = spec.seed + 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(ctx.case_rank);
    p.model =
        driver.create(ctx.c.workload, {spec.device, p.gpu, ctx.c.threads, rank_seed, spec.precision, spec.denormals});
    p.model->load_parameters(canonical_parameters(ctx.c.workload, spec.seed));
    if (spec.data == "synthetic") {
      p.model->set_batch(synthetic_batch(ctx.c.workload, spec.batch_per_rank(), spec.seed, ctx.case_rank));
    } else {
      p.dataset = data.get(spec.data);
      if (ctx.c.accuracy()) p.test = data.get(test_dataset_spec(spec.data));
      // A rank's first micro-batch of the first step (its K micro-batches lie side by side).
      p.model->set_batch(
          p.dataset->batch(int64_t{ctx.case_rank} * spec.accumulate * spec.batch_per_rank(), spec.batch_per_rank()));
    }
    built = reduction_support(ctx, p);
    // One rank has nothing to average: the default buckets reduce nothing there, so that one GPU's
    // step is the network's alone; buckets asked for go through a one-rank communicator.
    const double bucket_mb = spec.ranks == 1 && spec.bucket_mb_defaulted ? 0 : spec.bucket_mb;
    if (built.ok() && p.reducer) p.overlap = p.reducer->bind(*p.model, bucket_mb);
  } catch (...) {
    built = outcome_of(std::current_exception());
  }
  const Outcome agreed = agree(ctx.comm, built);
  if (!agreed.ok()) p.model.reset();
  return agreed;
}

}  // namespace

std::string PreparedCase::allreduce_mechanism(int ranks) const {
  if (reducer) return reducer->mechanism();
  if (buckets) return buckets->mechanism();
  return ranks > 1 ? "mpi_allreduce" : "none";
}

int64_t PreparedCase::allreduce_buckets(int ranks) const {
  if (reducer) return static_cast<int64_t>(reducer->bucket_count());
  if (buckets) return static_cast<int64_t>(buckets->bucket_count());
  return ranks > 1 ? 1 : 0;
}

void reset_memory_mark(Progress& progress) {
  release_freed_memory();
  if (!reset_peak_rss()) {
    progress.warn("cannot reset the peak-RSS mark: host_peak_rss_bytes is the process's lifetime peak");
  }
}

RankMemory PreparedCase::memory() const {
  RankMemory m;
  m.host_peak_rss_bytes = peak_rss_bytes();
  if (!model) return m;
  const MemoryStats stats = model->memory();
  m.device_peak_bytes = stats.device_peak_bytes;
  m.optimizer_state_bytes = stats.optimizer_state_bytes;
  const GradBuffer grads = model->grad_buffer();
  m.gradient_bytes = static_cast<int64_t>(grads.count * sizeof(float));
  // A driver that gives no host parameter buffer keeps as many parameters as gradients.
  const ParameterBuffer params = model->parameters();
  m.parameter_bytes =
      static_cast<int64_t>(params.data != nullptr ? params.count * params.value_bytes : grads.count * sizeof(float));
  return m;
}

PreparedCase prepare_case(const CaseContext& ctx, DatasetCache& data) {
  PreparedCase p;
  const CaseSpec& spec = ctx.c.spec;
  if (ctx.c.gpu()) {
    p.gpu = gpu_index_for(ctx.mpi.local_rank(), ctx.c.driver->device_count(DeviceType::kCuda, nullptr));
  }
  // Each part's outcome is agreed on every rank already: going on would only prefix the message
  // a second time.
  p.outcome = check_support(ctx, p.gpu);
  if (p.outcome.ok()) p.outcome = set_up_reduction(ctx, p);
  if (p.outcome.ok()) p.outcome = build_model(ctx, p, data);
  if (!p.outcome.ok()) return p;
  const bool sharded = spec.sharding != Sharding::kNone;
  p.mpi = {spec.grad_compression, resolved_hierarchy(spec.allreduce_hierarchy, ctx.c.placed, ctx.c.gpu(), sharded)};
  p.mpi.sharding = spec.sharding;
  // A CPU model's buffer is the canonical layout: a first Embedding layer's rows come first.
  const std::vector<Layer>& layers = ctx.c.workload.layers;
  if (spec.sparse_embedding && !layers.empty() && layers.front().kind == LayerKind::kEmbedding) {
    p.mpi.sparse_rows = static_cast<size_t>(layers.front().in);
    p.mpi.sparse_width = static_cast<size_t>(layers.front().out);
  }
  p.timer = p.model->make_step_timer();
  if (!p.timer) p.timer = make_host_step_timer(*p.model);
  if (!p.reducer && (spec.bucket_mb > 0 || sharded) && spec.ranks > 1) {
    // A CPU model's buffer is the canonical layout, whose layers' gradients backward finishes one
    // by one. A sharded optimiser's reduce-scatter is the buckets' also without a bucket size
    // (one bucket).
    p.buckets = std::make_unique<BucketedAllreduce>(p.model->grad_buffer(), ctx.comm, spec.bucket_mb,
                                                    layer_parameter_starts(ctx.c.workload), p.mpi);
    p.overlap = p.buckets->follow(*p.model);
  }
  return p;
}

}  // namespace dlscale
