#include "suite/record/reporters.h"

#include <cmath>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "schema/accuracy_record.h"
#include "suite/errors.h"
#include "suite/meters/utilisation.h"
#include "suite/record/case_fields.h"
#include "suite/record/json_text.h"

namespace dlscale {

std::string ResultsFileReporter::next_group() const { return fmt::format("{:04}", cases_); }

void ResultsFileReporter::case_finished(const CaseResult& r) {
  const auto writing = deadline_.hold_off();
  ResultsFile::Update update = file_.update();
  const std::string name = update.write_case(case_record(r));
  if (name != r.group) throw std::logic_error(fmt::format("case written as {}, announced as {}", name, r.group));
  if (r.allreduce) {
    update.append_group("allreduce",
                        allreduce_group(r.allreduce->result, r.allreduce->backend, name, r.allreduce->hosts, r.run));
  }
  if (r.projection) {
    const CaseProjection& p = *r.projection;
    update.write_group("cases/" + name + "/projection",
                       projection_group(p.projection, p.fit, p.network, p.compute_s, p.sharded_update_s, p.grad_bytes,
                                        scaling_name(r.c->spec.scaling)));
  }
  if (r.utilisation) update.write_group("cases/" + name + "/utilisation", utilisation_group(*r.utilisation));
  if (r.noise) update.write_group("cases/" + name + "/noise_scale", noise_scale_group(*r.noise));
  if (r.steps.timeline) {
    update.write_group("cases/" + name + "/timeline",
                       timeline_group(*r.steps.timeline, r.c->spec.ranks, r.steps.iterations, r.steps.buckets));
  }
  update.commit();
  ++cases_;
}

OutputFormat parse_output_format(const std::string& name) {
  if (name == "text") return OutputFormat::kText;
  if (name == "json") return OutputFormat::kJson;
  throw UsageError(fmt::format("--format {}: expected text or json", name));
}

void CaseLineReporter::case_finished(const CaseResult& r) {
  const std::string line =
      format_ == OutputFormat::kJson ? case_json(r) : fmt::format("{} {}", r.group, summary_line(r));
  fmt::print(out_, "{}\n", line);
  std::fflush(out_);
}

std::string Tally::line() const {
  int64_t total = 0;
  for (int64_t n : counts_) total += n;
  std::string line = fmt::format("dlscale: {} case(s): {} ok, {} unsupported, {} oom, {} timeout, {} error", total,
                                 counts_[0], counts_[1], counts_[2], counts_[3], counts_[4]);
  return skipped_ > 0 ? line + fmt::format(", {} skipped (already in the file)", skipped_) : line;
}

namespace {

/// " | optimizer … | test accuracy M [L, H] | train … | test … | target …": an accuracy case's
/// part of its summary line (means and 95% CIs over its repeats).
/// " | noise scale 850 [610, 1090]: x1.27 steps at B=64", or "" without an estimate: the simple
/// noise scale and the factor 1 + B_simple/B by which it multiplies the steps to a target.
std::string noise_text(const CaseResult& r) {
  if (!r.noise || !std::isfinite(r.noise->estimate.simple)) return "";
  const NoiseScale& n = r.noise->estimate;
  return fmt::format(" | noise scale {:.3g} [{:.3g}, {:.3g}]: x{:.3g} steps at B={}", n.simple, n.ci95_low, n.ci95_high,
                     1 + n.simple / n.batch_big, r.c->spec.global_batch());
}

std::string accuracy_summary_text(const CaseResult& r) {
  const AccuracySummary& summary = r.accuracy->summary;
  const auto interval = [](const MeanInterval& m, const char* format) {
    return fmt::format(fmt::runtime(format), m.mean, m.low, m.high);
  };
  const CaseSpec& spec = r.c->spec;
  const int64_t reached = summary.targets_reached;
  const std::string rate = spec.scaled_learning_rate() == spec.learning_rate
                               ? fmt::format("{}", spec.learning_rate)
                               : fmt::format("{} -> {} ({})", spec.learning_rate, spec.scaled_learning_rate(),
                                             lr_scaling_name(spec.lr_scaling));
  std::string line =
      fmt::format(" | {} lr {} | test accuracy {} | training {} | testing {}", optimizer_name(spec.optimizer), rate,
                  interval(summary.test_accuracy, "{:.4f} [{:.4f}, {:.4f}]"),
                  interval(summary.train_time_s, "{:.2f} s [{:.2f}, {:.2f}]"),
                  interval(summary.test_time_s, "{:.3f} s [{:.3f}, {:.3f}]"));
  if (std::isfinite(spec.target_accuracy)) {
    line += reached > 0
                ? fmt::format(" | time to {} {} ({}/{} reached)", spec.target_accuracy,
                              interval(summary.time_to_target_s, "{:.2f} s [{:.2f}, {:.2f}]"), reached, spec.repeats)
                : fmt::format(" | time to {}: not reached in {} epochs", spec.target_accuracy, spec.epochs);
  }
  return line + noise_text(r) + fmt::format(" | {} repeat(s) | ok", spec.repeats);
}

/// " | cpu … | contended: … | N% of peak | J/sample | ok": a timing case's utilisation part.
std::string utilisation_text(const CaseUtilisation& u) {
  std::string line = fmt::format(" | cpu {:.2f} busy {:.2f} kernel {:.0f}% {:.3g} faults/step", u.cpu_utilisation,
                                 u.busy_cores, u.system_share * 100, u.page_faults_per_step);
  if (u.contended) {
    std::vector<std::string> why;
    if (std::isfinite(u.cpu_wait_share)) {
      why.push_back(fmt::format("{:.0f}% of runnable time waiting for a core", u.cpu_wait_share * 100));
    }
    if (std::isfinite(u.cpu_steal_share) && u.cpu_steal_share >= kContendedStealShare) {
      why.push_back(fmt::format("{:.0f}% stolen by the hypervisor", u.cpu_steal_share * 100));
    }
    line += fmt::format(" | contended: {}", fmt::join(why, ", "));
  }
  const std::string& above = u.peak_share_note;
  line += std::isfinite(u.peak_share) ? fmt::format(" | {:.1f}% of peak{}", u.peak_share * 100,
                                                    above.empty() ? "" : " (above it: " + above + ")")
                                      : std::string(" | peak unavailable");
  line += std::isfinite(u.energy_j_per_sample) ? fmt::format(" | {:.3g} J/sample", u.energy_j_per_sample)
                                               : std::string(" | energy unavailable");
  return line + " | ok";
}

std::string json_value(const AttrValue& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return json_string(*s);
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  return json_number(std::get<double>(v));
}

/// " (5 buckets on a communication thread)" for a bucketed case, else "".
std::string bucket_text(const CaseResult& r) {
  const std::string& m = r.allreduce_mechanism;
  const char* where = m == "mpi_allreduce_buckets_thread"           ? "on a communication thread"
                      : m == "mpi_allreduce_buckets_after_backward" ? "after backward"
                      : m == "nccl_buckets_stream"                  ? "on a stream"
                                                                    : nullptr;
  if (where == nullptr) return "";
  return fmt::format(" ({} bucket{} {})", r.allreduce_buckets, r.allreduce_buckets == 1 ? "" : "s", where);
}

}  // namespace

std::string summary_line(const CaseResult& r) {
  const ResolvedCase& c = *r.c;
  const CaseSpec& s = c.spec;
  std::string line =
      fmt::format("{:<10} {:<9} {:<4} {}{} {} {} P={} b={}/{} t={}", s.workload, s.driver, device_name(s.device),
                  precision_name(s.precision), r.isa.empty() ? "" : "@" + r.isa, denormals_name(s.denormals),
                  scaling_name(s.scaling), s.ranks, s.batch_per_rank(), s.global_batch(), c.threads);
  if (s.accumulate > 1) line += fmt::format(" K={}", s.accumulate);
  if (!r.outcome.ok()) return line + fmt::format(" | {}: {}", status_name(r.outcome.status), r.outcome.message);
  if (r.accuracy) return line + accuracy_summary_text(r);
  const StepSummary& m = *r.summary;
  line += fmt::format(" | step {:.2f} ms [{:.2f}, {:.2f}] | {:.1f} samples/s | {:.2f} GFLOP/s", m.stats.median * 1e3,
                      m.stats.ci95_low * 1e3, m.stats.ci95_high * 1e3, m.samples_per_s, m.achieved_flops / 1e9);
  if (m.exposed_allreduce_median_s) {
    // A sharded optimiser's buckets are reduce-scattered; its all-gather is in the update.
    line += fmt::format(" | exposed {} {:.2f} ms{}", s.sharding == Sharding::kNone ? "all-reduce" : "reduce-scatter",
                        *m.exposed_allreduce_median_s * 1e3, bucket_text(r));
  }
  return line + noise_text(r) + utilisation_text(*r.utilisation);
}

std::string case_json(const CaseResult& r) {
  std::string out = "{\"case\": " + json_string(r.group);
  const Attrs accuracy = r.accuracy && r.outcome.ok() ? attrs_of(r.accuracy->summary, kAccuracySummaryFields) : Attrs{};
  for (const Attrs& attrs : {case_attrs(r), summary_attrs(r), accuracy}) {
    for (const auto& [key, value] : attrs) out += ", " + json_string(key) + ": " + json_value(value);
  }
  return out + "}";
}

}  // namespace dlscale
