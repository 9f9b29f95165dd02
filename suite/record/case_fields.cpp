#include "suite/record/case_fields.h"

#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "suite/comm/clock_sync.h"
#include "suite/data/datasets.h"
#include "suite/matrix/placement.h"
#include "suite/record/fields.h"

namespace dlscale {

namespace {

using R = CaseResult;

AttrValue text(const char* s) { return std::string(s); }
AttrValue flag(bool b) { return int64_t{b ? 1 : 0}; }

/// What the case is: known before it runs.
const Field<R> kDescription[] = {
    {"workload", [](const R& r) -> AttrValue { return r.c->spec.workload; }},
    {"driver", [](const R& r) -> AttrValue { return r.c->spec.driver; }},
    {"device_type", [](const R& r) { return text(device_name(r.c->spec.device)); }},
    {"precision", [](const R& r) { return text(precision_name(r.c->spec.precision)); }},
    {"denormals", [](const R& r) { return text(denormals_name(r.c->spec.denormals)); }},
    {"isa", [](const R& r) -> AttrValue { return r.isa; }},
    {"scaling", [](const R& r) { return text(scaling_name(r.c->spec.scaling)); }},
    {"ranks", [](const R& r) -> AttrValue { return int64_t{r.c->spec.ranks}; }},
    {"participants", [](const R& r) -> AttrValue { return format_participants(r.c->placed.world); }},
    {"placement", [](const R& r) { return text(placement_name(r.c->spec.placement)); }},
    {"hosts", [](const R& r) -> AttrValue { return int64_t{r.c->placed.hosts}; }},
    {"batch_per_rank", [](const R& r) -> AttrValue { return r.c->spec.batch_per_rank(); }},
    {"global_batch", [](const R& r) -> AttrValue { return r.c->spec.global_batch(); }},
    {"threads", [](const R& r) -> AttrValue { return int64_t{r.c->threads}; }},
    // An accuracy case times epochs, not steps: no warm-up and no timed iterations.
    {"warmup", [](const R& r) -> AttrValue { return int64_t{r.c->accuracy() ? 0 : r.c->spec.warmup}; }},
    {"iterations", [](const R& r) -> AttrValue { return int64_t{r.c->accuracy() ? 0 : r.c->spec.iterations}; }},
    {"seed", [](const R& r) -> AttrValue { return static_cast<int64_t>(r.c->spec.seed); }},
    {"params", [](const R& r) -> AttrValue { return r.c->params; }},
    {"train_flops_per_step", [](const R& r) -> AttrValue { return r.c->train_flops_per_step; }},
    {"grad_bytes", [](const R& r) -> AttrValue { return r.c->grad_bytes(); }},
    {"phases", [](const R& r) { return flag(r.c->spec.phases); }},
    {"data", [](const R& r) -> AttrValue { return r.c->spec.data; }},
    {"bucket_mb", [](const R& r) -> AttrValue { return r.c->spec.bucket_mb; }},
    {"case_key", [](const R& r) -> AttrValue { return r.c->key; }},
    {"started_utc", [](const R& r) -> AttrValue { return r.started_utc; }},
    {"mode", [](const R& r) { return text(run_mode_name(r.c->spec.mode)); }},
    {"optimizer", [](const R& r) { return text(optimizer_name(r.c->spec.optimizer)); }},
    {"learning_rate", [](const R& r) -> AttrValue { return r.c->spec.learning_rate; }},
};

/// An accuracy case's request and data (docs/running.md, "Accuracy runs").
const Field<R> kAccuracy[] = {
    {"epochs", [](const R& r) -> AttrValue { return int64_t{r.c->spec.epochs}; }},
    {"validation_fraction", [](const R& r) -> AttrValue { return r.c->spec.validation; }},
    {"target_accuracy", [](const R& r) -> AttrValue { return r.c->spec.target_accuracy; }},
    {"repeats", [](const R& r) -> AttrValue { return int64_t{r.c->spec.repeats}; }},
    {"train_samples", [](const R& r) -> AttrValue { return r.accuracy->train_samples; }},
    {"validation_samples", [](const R& r) -> AttrValue { return r.accuracy->validation_samples; }},
    {"test_samples", [](const R& r) -> AttrValue { return r.accuracy->test_samples; }},
    {"test_data", [](const R& r) -> AttrValue { return test_dataset_spec(r.c->spec.data); }},
};

/// How it ended, and the run that recorded it.
const Field<R> kOutcome[] = {
    {"overlap", [](const R& r) { return flag(r.overlap); }},
    {"progress_thread", [](const R& r) { return flag(r.progress_thread); }},
    {"allreduce_mechanism", [](const R& r) -> AttrValue { return r.allreduce_mechanism; }},
    {"allreduce_buckets", [](const R& r) -> AttrValue { return r.allreduce_buckets; }},
    {"mpi_allreduce_settings", [](const R& r) -> AttrValue { return r.mpi_allreduce_settings; }},
    {"blas_core", [](const R& r) -> AttrValue { return r.blas.used; }},
    {"blas_core_chosen", [](const R& r) -> AttrValue { return r.blas.chosen; }},
    {"blas_core_reason", [](const R& r) -> AttrValue { return r.blas.reason; }},
    {"blas_core_below_cpu", [](const R& r) { return flag(r.blas.below_cpu); }},
    {"status", [](const R& r) { return text(status_name(r.outcome.status)); }},
    {"message", [](const R& r) -> AttrValue { return r.outcome.message; }},
    {"wall_s", [](const R& r) -> AttrValue { return r.wall_s; }},
    {"allocator", [](const R& r) -> AttrValue { return r.allocator; }},
    {"run", [](const R& r) -> AttrValue { return r.run; }},
};

/// A timing case's step statistics (docs/metrics.md, "Step time").
const Field<StepSummary> kStepSummary[] = {
    {"step_median_s", [](const StepSummary& s) -> AttrValue { return s.stats.median; }},
    {"step_p05_s", [](const StepSummary& s) -> AttrValue { return s.stats.p05; }},
    {"step_p95_s", [](const StepSummary& s) -> AttrValue { return s.stats.p95; }},
    {"step_mean_s", [](const StepSummary& s) -> AttrValue { return s.stats.mean; }},
    {"step_std_s", [](const StepSummary& s) -> AttrValue { return s.stats.std; }},
    {"step_cv", [](const StepSummary& s) -> AttrValue { return s.stats.cv; }},
    {"ci95_low_s", [](const StepSummary& s) -> AttrValue { return s.stats.ci95_low; }},
    {"ci95_high_s", [](const StepSummary& s) -> AttrValue { return s.stats.ci95_high; }},
    {"ci_coverage", [](const StepSummary& s) -> AttrValue { return s.stats.ci_coverage; }},
    {"samples_per_s", [](const StepSummary& s) -> AttrValue { return s.samples_per_s; }},
    {"achieved_flops", [](const StepSummary& s) -> AttrValue { return s.achieved_flops; }},
    {"straggler_ratio", [](const StepSummary& s) -> AttrValue { return s.stats.straggler_ratio; }},
};

/// The median of each phase of the slowest rank (--phases), in Phase order.
const char* const kPhaseSummary[kPhaseCount] = {"forward_median_s", "backward_median_s", "allreduce_median_s",
                                                "update_median_s"};

using U = CaseUtilisation;

/// Utilisation, share of peak and energy (docs/metrics.md, "Utilisation and energy").
const Field<U> kUtilisationSummary[] = {
    {"cpu_utilisation", [](const U& u) -> AttrValue { return u.cpu_utilisation; }},
    {"busy_cores", [](const U& u) -> AttrValue { return u.busy_cores; }},
    {"user_s_per_step", [](const U& u) -> AttrValue { return u.user_s_per_step; }},
    {"system_s_per_step", [](const U& u) -> AttrValue { return u.system_s_per_step; }},
    {"system_share", [](const U& u) -> AttrValue { return u.system_share; }},
    {"page_faults_per_step", [](const U& u) -> AttrValue { return u.page_faults_per_step; }},
    {"major_faults_per_step", [](const U& u) -> AttrValue { return u.major_faults_per_step; }},
    {"cpu_wait_share", [](const U& u) -> AttrValue { return u.cpu_wait_share; }},
    {"cpu_steal_share", [](const U& u) -> AttrValue { return u.cpu_steal_share; }},
    {"contended", [](const U& u) { return flag(u.contended); }},
    {"peak_flops", [](const U& u) -> AttrValue { return u.peak_flops; }},
    {"peak_share", [](const U& u) -> AttrValue { return u.peak_share; }},
    {"peak_share_note", [](const U& u) -> AttrValue { return u.peak_share_note; }},
    {"energy_j_per_step", [](const U& u) -> AttrValue { return u.energy_j_per_step; }},
    {"energy_j_per_sample", [](const U& u) -> AttrValue { return u.energy_j_per_sample; }},
};

/// The utilisation group's attributes.
const Field<U> kUtilisationAttrs[] = {
    {"threads", [](const U& u) -> AttrValue { return int64_t{u.threads}; }},
    {"peak", [](const U& u) -> AttrValue { return u.peak_note; }},
    {"energy", [](const U& u) -> AttrValue { return u.energy_note; }},
};

using Rank = RankUtilisation;

/// /cases/NNNN/utilisation/per_rank: one row per rank of the case, in case-rank order.
const ColumnField<Rank> kUtilisationPerRank[] = {
    {"rank", [](const Rank&, size_t i) -> AttrValue { return static_cast<int64_t>(i); }},
    {"cpu_time_s", [](const Rank& r, size_t) -> AttrValue { return r.meters.cpu_s; }},
    {"wall_s", [](const Rank& r, size_t) -> AttrValue { return r.meters.wall_s; }},
    {"cpu_utilisation", [](const Rank& r, size_t) -> AttrValue { return r.cpu_utilisation; }},
    {"busy_cores", [](const Rank& r, size_t) -> AttrValue { return r.busy_cores; }},
    {"cpu_energy_j", [](const Rank& r, size_t) -> AttrValue { return r.meters.cpu_energy_j; }},
    {"cpu_energy_source", [](const Rank& r, size_t) -> AttrValue { return r.cpu_energy_source; }},
    {"gpu_energy_j", [](const Rank& r, size_t) -> AttrValue { return r.meters.gpu_energy_j; }},
    {"gpu_utilisation_pct", [](const Rank& r, size_t) -> AttrValue { return r.meters.gpu_utilisation_pct; }},
    {"gpu_sm_clock_mhz", [](const Rank& r, size_t) -> AttrValue { return r.meters.gpu_sm_clock_mhz; }},
    {"gpu_power_w", [](const Rank& r, size_t) -> AttrValue { return r.meters.gpu_power_w; }},
    {"gpu_samples", [](const Rank& r, size_t) -> AttrValue { return static_cast<int64_t>(r.meters.gpu_samples); }},
    {"gpu_source", [](const Rank& r, size_t) -> AttrValue { return r.gpu_source; }},
    {"user_s", [](const Rank& r, size_t) -> AttrValue { return r.meters.user_s; }},
    {"system_s", [](const Rank& r, size_t) -> AttrValue { return r.meters.system_s; }},
    {"minor_faults", [](const Rank& r, size_t) -> AttrValue { return r.meters.minor_faults; }},
    {"major_faults", [](const Rank& r, size_t) -> AttrValue { return r.meters.major_faults; }},
    {"run_wait_s", [](const Rank& r, size_t) -> AttrValue { return r.meters.run_wait_s; }},
    {"run_s", [](const Rank& r, size_t) -> AttrValue { return r.meters.run_s; }},
    {"steal_share", [](const Rank& r, size_t) -> AttrValue { return r.meters.steal_share; }},
    {"contended", [](const Rank& r, size_t) { return flag(r.meters.cpu().contended()); }},
};

/// /cases/NNNN/memory: one row per rank of the case.
const ColumnField<RankMemory> kMemory[] = {
    {"host_peak_rss_bytes", [](const RankMemory& m, size_t) -> AttrValue { return m.host_peak_rss_bytes; }},
    {"device_peak_bytes", [](const RankMemory& m, size_t) -> AttrValue { return m.device_peak_bytes; }},
};

/// /cases/NNNN/timeline's data sets: each a member of CaseTimeline and its shape.
struct TimelineDataset {
  const char* name;
  std::vector<double> CaseTimeline::*values;
  std::vector<uint64_t> (*dims)(uint64_t ranks, uint64_t iterations, uint64_t buckets);
};

const TimelineDataset kTimeline[] = {
    {"step_start_s", &CaseTimeline::step_start_s,
     [](uint64_t ranks, uint64_t iters, uint64_t) {
       return std::vector<uint64_t>{ranks, iters};
     }},
    {"bucket_reduction_s", &CaseTimeline::bucket_reduction_s,
     [](uint64_t ranks, uint64_t iters, uint64_t buckets) {
       return std::vector<uint64_t>{ranks, iters, buckets, 2};
     }},
    {"clock_at_s", &CaseTimeline::clock_at_s,
     [](uint64_t ranks, uint64_t, uint64_t) {
       return std::vector<uint64_t>{ranks, 2};
     }},
    {"clock_offset_s", &CaseTimeline::clock_offset_s,
     [](uint64_t ranks, uint64_t, uint64_t) {
       return std::vector<uint64_t>{ranks, 2};
     }},
    {"clock_bound_s", &CaseTimeline::clock_bound_s,
     [](uint64_t ranks, uint64_t, uint64_t) {
       return std::vector<uint64_t>{ranks, 2};
     }},
};

}  // namespace

Attrs case_attrs(const CaseResult& r) {
  Attrs a;
  append_attrs(a, r, kDescription);
  if (r.accuracy) append_attrs(a, r, kAccuracy);
  append_attrs(a, r, kOutcome);
  return a;
}

Attrs summary_attrs(const CaseResult& r) {
  Attrs a;
  if (!r.summary) return a;
  append_attrs(a, *r.summary, kStepSummary);
  if (r.summary->exposed_allreduce_median_s)
    a.emplace_back("exposed_allreduce_median_s", *r.summary->exposed_allreduce_median_s);
  if (r.summary->phase_median_s) {
    for (int p = 0; p < kPhaseCount; ++p)
      a.emplace_back(kPhaseSummary[p], (*r.summary->phase_median_s)[static_cast<size_t>(p)]);
  }
  if (r.utilisation) append_attrs(a, *r.utilisation, kUtilisationSummary);
  return a;
}

CaseRecord case_record(const CaseResult& r) {
  CaseRecord rec;
  rec.attrs = case_attrs(r);
  rec.ranks = r.c->spec.ranks;
  rec.iterations = r.steps.iterations;
  rec.iter_time_s = r.steps.iter_time_s;
  rec.phase_time_s = r.steps.phase_time_s;
  rec.exposed_allreduce_s = r.steps.exposed_allreduce_s;
  rec.loss = r.steps.loss;
  rec.bucket_start_s = r.steps.bucket_start_s;
  rec.buckets = r.steps.buckets;
  rec.memory = table_of(r.memory, kMemory);
  rec.summary = summary_attrs(r);
  if (r.accuracy && r.outcome.ok()) {
    rec.repeats = r.accuracy->repeats;
    rec.accuracy_summary = r.accuracy->summary;
  }
  return rec;
}

GroupRecord utilisation_group(const CaseUtilisation& u) {
  GroupRecord g;
  g.tables.emplace_back("per_rank", table_of(u.ranks, kUtilisationPerRank));
  append_attrs(g.attrs, u, kUtilisationAttrs);
  return g;
}

GroupRecord timeline_group(const CaseTimeline& t, int64_t ranks, int64_t iterations, int64_t buckets) {
  GroupRecord g;
  g.attrs.emplace_back("clock", std::string("monotonic"));
  g.attrs.emplace_back("clock_sync", describe_clock_sync());
  for (const TimelineDataset& d : kTimeline) {
    const std::vector<double>& values = t.*d.values;
    if (values.empty()) continue;  // no buckets
    DatasetRecord rec;
    rec.name = d.name;
    rec.dims = d.dims(static_cast<uint64_t>(ranks), static_cast<uint64_t>(iterations), static_cast<uint64_t>(buckets));
    rec.doubles = values;
    g.datasets.push_back(std::move(rec));
  }
  return g;
}

std::vector<std::string> timeline_dataset_names() { return field_names(kTimeline); }

std::vector<std::string> step_summary_keys() { return field_names(kStepSummary); }

std::vector<std::string> phase_summary_keys() { return {std::begin(kPhaseSummary), std::end(kPhaseSummary)}; }

}  // namespace dlscale
