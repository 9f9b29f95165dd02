#include "suite/record/case_fields.h"

#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "schema/case_record.h"
#include "schema/fields.h"
#include "suite/comm/clock_sync.h"
#include "suite/data/datasets.h"
#include "suite/matrix/placement.h"

namespace dlscale {

namespace {

using R = CaseResult;

AttrValue flag(bool b) { return int64_t{b ? 1 : 0}; }

CaseDescription description(const R& r) {
  const CaseSpec& spec = r.c->spec;
  CaseDescription d;
  d.workload = spec.workload;
  d.driver = spec.driver;
  d.device_type = device_name(spec.device);
  d.precision = precision_name(spec.precision);
  d.denormals = denormals_name(spec.denormals);
  d.isa = r.isa;
  d.scaling = scaling_name(spec.scaling);
  d.ranks = spec.ranks;
  d.participants = format_participants(r.c->placed.world);
  d.placement = placement_name(spec.placement);
  d.hosts = r.c->placed.hosts;
  d.batch_per_rank = spec.batch_per_rank();
  d.global_batch = spec.global_batch();
  d.threads = r.c->threads;
  // An accuracy case times epochs, not steps: no warm-up and no timed iterations.
  d.warmup = r.c->accuracy() ? 0 : spec.warmup;
  d.iterations = r.c->accuracy() ? 0 : spec.iterations;
  d.seed = static_cast<int64_t>(spec.seed);
  d.params = r.c->params;
  d.train_flops_per_step = r.c->train_flops_per_step;
  d.grad_bytes = r.c->grad_bytes();
  d.phases = spec.phases;
  d.data = spec.data;
  d.bucket_mb = spec.bucket_mb;
  d.grad_compression = grad_compression_name(spec.grad_compression);
  d.allreduce_hierarchy = hierarchy_name(
      resolved_hierarchy(spec.allreduce_hierarchy, r.c->placed, r.c->gpu(), spec.sharding != Sharding::kNone));
  d.sharding = sharding_name(spec.sharding);
  d.case_key = r.c->key;
  d.started_utc = r.started_utc;
  d.mode = run_mode_name(spec.mode);
  d.optimizer = optimizer_name(spec.optimizer);
  d.learning_rate = spec.learning_rate;
  d.accumulate = spec.accumulate;
  d.lr_scaling = lr_scaling_name(spec.lr_scaling);
  d.lr_base_batch = spec.lr_base_batch;
  d.scaled_learning_rate = spec.scaled_learning_rate();
  return d;
}

CaseAccuracyRequest accuracy_request(const R& r) {
  const CaseSpec& spec = r.c->spec;
  return {spec.epochs,
          spec.validation,
          spec.target_accuracy,
          spec.repeats,
          r.accuracy->train_samples,
          r.accuracy->validation_samples,
          r.accuracy->test_samples,
          test_dataset_spec(spec.data),
          spec.lr_warmup_epochs,
          spec.eval_every};
}

CaseOutcome outcome(const R& r) {
  return {r.overlap,
          r.progress_thread,
          r.allreduce_mechanism,
          r.allreduce_buckets,
          r.allreduce_lanes,
          r.allreduce_segment_bytes,
          r.mpi_allreduce_settings,
          r.blas.used,
          r.blas.chosen,
          r.blas.reason,
          r.blas.below_cpu,
          status_name(r.outcome.status),
          r.outcome.message,
          r.wall_s,
          r.allocator,
          r.run,
          r.sparse_embedding_rows_share,
          r.sparse_embedding_crossover_share};
}

StepStatistics step_statistics(const StepSummary& s) {
  return {s.stats.median,      s.stats.p05,     s.stats.p95,      s.stats.mean,
          s.stats.std,         s.stats.cv,      s.stats.ci95_low, s.stats.ci95_high,
          s.stats.ci_coverage, s.samples_per_s, s.achieved_flops, s.stats.straggler_ratio};
}

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
    {"parameter_bytes", [](const RankMemory& m, size_t) -> AttrValue { return m.parameter_bytes; }},
    {"gradient_bytes", [](const RankMemory& m, size_t) -> AttrValue { return m.gradient_bytes; }},
    {"optimizer_state_bytes", [](const RankMemory& m, size_t) -> AttrValue { return m.optimizer_state_bytes; }},
};

/// /cases/NNNN/timeline's attributes: the clock its times are on, and how the ranks' clocks were
/// put on rank 0's.
struct TimelineAttrs {
  std::string clock, clock_sync;
};

const Field<TimelineAttrs> kTimelineAttrs[] = {
    member<&TimelineAttrs::clock>("clock"),
    member<&TimelineAttrs::clock_sync>("clock_sync"),
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
  append_attrs(a, description(r), kCaseDescriptionFields);
  if (r.accuracy) append_attrs(a, accuracy_request(r), kCaseAccuracyRequestFields);
  append_attrs(a, outcome(r), kCaseOutcomeFields);
  return a;
}

Attrs summary_attrs(const CaseResult& r) {
  Attrs a;
  if (!r.summary) return a;
  append_attrs(a, step_statistics(*r.summary), kStepStatisticsFields);
  if (r.summary->exposed_allreduce_median_s) {
    append_attrs(a,
                 ExposedAllreduce{*r.summary->exposed_allreduce_median_s, r.summary->exposed_allreduce_least_median_s},
                 kExposedAllreduceFields);
  }
  if (r.summary->phase_median_s) {
    // In Phase order.
    const auto& m = *r.summary->phase_median_s;
    static_assert(kPhaseCount == 4, "a phase the summary does not record");
    append_attrs(a, PhaseMedians{m[0], m[1], m[2], m[3]}, kPhaseMedianFields);
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
  rec.parameter_gather_s = r.steps.parameter_gather_s;
  rec.loss = r.steps.loss;
  rec.bucket_start_s = r.steps.bucket_start_s;
  rec.buckets = r.steps.buckets;
  rec.bucket_bytes = r.steps.bucket_bytes;
  rec.memory = table_of(r.memory, kMemory);
  rec.summary = summary_attrs(r);
  if (r.accuracy && r.outcome.ok()) {
    for (const RepeatResult& repeat : r.accuracy->repeats) rec.repeats.push_back(repeat_group(repeat));
    rec.accuracy_summary = attrs_of(r.accuracy->summary, kAccuracySummaryFields);
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
  append_attrs(g.attrs, TimelineAttrs{"monotonic", describe_clock_sync()}, kTimelineAttrs);
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

GroupRecord noise_scale_group(const CaseNoiseScale& n) {
  GroupRecord g;
  append_attrs(g.attrs, n.estimate, kNoiseScaleFields);
  g.attrs.emplace_back("definition", std::string(kNoiseScaleDefinition));
  for (const auto& [name, values] : {std::pair{"small_sq", &n.small_sq}, std::pair{"big_sq", &n.big_sq}}) {
    DatasetRecord rec;
    rec.name = name;
    rec.dims = {static_cast<uint64_t>(values->size())};
    rec.doubles = *values;
    g.datasets.push_back(std::move(rec));
  }
  return g;
}

std::vector<std::string> timeline_dataset_names() { return field_names(kTimeline); }

std::vector<std::string> step_summary_keys() { return field_names(kStepStatisticsFields); }

std::vector<std::string> phase_summary_keys() { return field_names(kPhaseMedianFields); }

}  // namespace dlscale
