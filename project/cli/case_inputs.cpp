#include "project/cli/case_inputs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "drivers/gradient_buckets.h"
#include "drivers/gradient_compression.h"
#include "schema/case_record.h"
#include "schema/projection_record.h"
#include "schema/run_record.h"

namespace dlscale::project {
namespace {

/// More buckets than this would make the simulation of one step as long as a real run's
/// bucketing is pointless (a bucket of a few floats): refused rather than simulated for hours.
constexpr size_t kMaxBuckets = 4096;

/// A case's attributes as dlscale wrote them, and those its file lacks (older versions wrote
/// fewer: a missing text is "", a missing number 0).
struct RecordedCase {
  CaseDescription description;
  CaseOutcome outcome;
  StepStatistics summary;
  std::vector<std::string> missing;
  std::string where;
  bool lacks(const char* name) const { return std::find(missing.begin(), missing.end(), name) != missing.end(); }
  /// Throws naming the attribute when the file lacks it.
  void require(const char* name) const {
    if (lacks(name)) throw std::invalid_argument(fmt::format("{}: attribute {} is missing", where, name));
  }
};

RecordedCase recorded_case(const CaseRecord& record, const std::string& where) {
  RecordedCase r;
  r.where = where;
  try {
    for (const std::vector<std::string>& missing : {read_fields(record.attrs, kCaseDescriptionFields, r.description),
                                                    read_fields(record.attrs, kCaseOutcomeFields, r.outcome),
                                                    read_fields(record.summary, kStepStatisticsFields, r.summary)}) {
      r.missing.insert(r.missing.end(), missing.begin(), missing.end());
    }
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(where + ": " + e.what());
  }
  return r;
}

}  // namespace

std::string unusable_reason(const CaseRecord& record) {
  if (record.accuracy()) return "an accuracy case (no step samples)";
  const RecordedCase r = recorded_case(record, "the case");
  if (r.outcome.status != "ok") {
    return fmt::format("status {}, not ok", r.outcome.status.empty() ? "missing" : r.outcome.status);
  }
  if (!r.description.phases || record.phase_time_s.empty()) return "no per-rank phase times (run it with --phases)";
  // Its update phase holds the parameters' all-gather, which the simulation takes out of the
  // measured compute and puts on the network: files that did not record it apart cannot say how.
  if (!r.lacks("sharding") && r.description.sharding != "none" && record.ranks > 1 &&
      record.parameter_gather_s.empty()) {
    return fmt::format(
        "a sharded optimiser (sharding {}) without parameter_gather_s (written before dlscale recorded "
        "the all-gather apart from the update)",
        r.description.sharding);
  }
  return "";
}

std::vector<GradientBucket> estimated_buckets(double grad_bytes, double bucket_mb) {
  if (!(grad_bytes > 0)) throw std::invalid_argument(fmt::format("grad_bytes {} is not positive", grad_bytes));
  if (!(bucket_mb >= 0) || !std::isfinite(bucket_mb)) {
    throw std::invalid_argument(fmt::format("bucket_mb {} is not a number >= 0", bucket_mb));
  }
  // bucket_mb 0: one MPI_Allreduce of the whole buffer once backward has returned.
  if (bucket_mb == 0) return {{grad_bytes, 1}};
  // As dlscale cuts a buffer whose layers it does not know (cut_buckets without units): float32
  // elements, bucket_mb x 1e6 bytes (MB, not MiB) rounded down to whole elements.
  const double elems = std::floor(grad_bytes / 4);
  const auto bucket_elems = static_cast<double>(bucket_elements_for(bucket_mb));
  const auto count = static_cast<size_t>(std::ceil(elems / bucket_elems));
  if (count > kMaxBuckets) {
    throw std::invalid_argument(fmt::format("bucket_mb {} cuts {} bytes into {} buckets, more than the {} simulated",
                                            bucket_mb, grad_bytes, count, kMaxBuckets));
  }
  std::vector<double> bytes;
  for (const BucketRange& b : cut_buckets(static_cast<size_t>(elems), static_cast<size_t>(bucket_elems))) {
    bytes.push_back(static_cast<double>(b.count) * 4);
  }
  return recorded_buckets(bytes);
}

std::vector<GradientBucket> recorded_buckets(const std::vector<double>& bucket_bytes) {
  if (bucket_bytes.size() > kMaxBuckets) {
    throw std::invalid_argument(
        fmt::format("bucket_bytes holds {} buckets, more than the {} simulated", bucket_bytes.size(), kMaxBuckets));
  }
  double total = 0;
  for (const double b : bucket_bytes) {
    if (!(b > 0) || !std::isfinite(b)) throw std::invalid_argument(fmt::format("bucket_bytes holds {}", b));
    total += b;
  }
  // Backward produces the buffer's gradients from its end to its start (the last layer's first),
  // and dlscale starts buckets from the last to the first: the bucket starting at byte f is
  // ready once backward has produced bytes [f, total), which is taken as that share of
  // backward's time. An estimate, which measured ready times replace (apply_measured_readiness).
  std::vector<GradientBucket> out;
  double after = 0;  // bytes after the bucket's start
  for (auto b = bucket_bytes.rbegin(); b != bucket_bytes.rend(); ++b) {
    after += *b;
    out.push_back({*b, b + 1 == bucket_bytes.rend() ? 1.0 : after / total});
  }
  return out;
}

namespace {

/// How the case's buckets were reduced (its recorded mechanism, "" in older files): the
/// algorithm and whether a thread progressed them.
void read_mechanism(const RecordedCase& r, const SoftwareRecord& software, bool bucketed, CaseInputs& c) {
  if (!r.outcome.allreduce_mechanism.empty()) {
    // As recorded: MPI_Allreduce (per bucket or whole) or NCCL, both rings at large sizes.
    c.progressed_by_thread = r.outcome.allreduce_mechanism != "mpi_allreduce_buckets_after_backward";
    c.lanes = static_cast<int>(r.outcome.allreduce_lanes);  // 1 where the file does not say
    if (c.lanes < 1) throw std::invalid_argument(fmt::format("allreduce_lanes {} is below 1", c.lanes));
    return;
  }
  // Before the mechanism was recorded, buckets were MPI_Iallreduce calls, which Open MPI 4.1
  // runs as a binomial tree, progressed by a thread where the run's thread level allowed one.
  const std::string& level = software.mpi_thread_level;
  c.progressed_by_thread = level.empty() || level == "MPI_THREAD_SERIALIZED" || level == "MPI_THREAD_MULTIPLE";
  // The case's own record where it has one: such files could name MPI_THREAD_SERIALIZED while
  // Open MPI had lowered the level when dlscale read its settings (docs/projection.md).
  if (bucketed && !r.lacks(name_of<&CaseOutcome::progress_thread>(kCaseOutcomeFields)))
    c.progressed_by_thread = r.outcome.progress_thread;
  if (bucketed && r.description.device_type != "cuda") c.algorithm = AllreduceAlgorithm::binomial;
}

}  // namespace

namespace {

/// Compressed gradients cross the network in 16 bits: half of each bucket's bytes (its record is
/// the float32 gradient's), but for an embedding's rows (`rows`: the last bucket), which go in
/// float32 gathered or dense. An unknown `compression` is refused naming the case (`where`).
void to_wire_bytes(const std::string& compression, const std::string& where, bool rows,
                   std::vector<GradientBucket>& buckets) {
  try {
    const double share = wire_bytes(parse_grad_compression(compression)) / 4.0;
    for (size_t i = 0; i + (rows ? 1 : 0) < buckets.size(); ++i) buckets[i].bytes *= share;
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(where + ": " + e.what());
  }
}

/// Bytes of a parameter over bytes of its gradient (float32), from the case's memory rows: 2 for
/// a driver whose parameters are float64 (the reference); 1 where the file does not say.
double parameter_scale(const CaseRecord& record) {
  const auto has = [&](const char* name) {
    for (const Column& c : record.memory.columns) {
      if (c.name == name && !c.is_string && c.size() > 0) return true;
    }
    return false;
  };
  if (!has("parameter_bytes") || !has("gradient_bytes")) return 1;
  const auto first = [&](const char* name) {
    const Column& c = record.memory.column(name);
    return c.is_double ? c.doubles.front() : static_cast<double>(c.ints.front());
  };
  const double params = first("parameter_bytes"), grads = first("gradient_bytes");
  return params > 0 && grads > 0 && std::isfinite(params / grads) ? params / grads : 1;
}

/// The case's embedding summed as rows, where it recorded one: the buffer's first recorded bucket,
/// its row width from the recorded crossover share (2 width / (P (width + 1)) at the measured P).
std::optional<SparseEmbedding> sparse_embedding(const CaseRecord& record, const RecordedCase& r,
                                                const std::string& where) {
  const double share = r.outcome.sparse_embedding_rows_share, crossover = r.outcome.sparse_embedding_crossover_share;
  if (std::isnan(share)) return std::nullopt;
  const double x = crossover * static_cast<double>(record.ranks) / 2;  // width / (width + 1)
  if (!(share >= 0 && share <= 1) || !(x > 0 && x < 1) || record.bucket_bytes.empty()) {
    throw std::invalid_argument(
        fmt::format("{}: sparse_embedding_rows_share {} with crossover share {} on {} ranks and {} recorded buckets "
                    "describe no embedding",
                    where, share, crossover, record.ranks, record.bucket_bytes.size()));
  }
  SparseEmbedding e;
  e.width = static_cast<int>(std::lround(x / (1 - x)));
  e.block_bytes = record.bucket_bytes.front();
  e.rows_share = share;
  const double rows = e.block_bytes / 4 / e.width;
  if (e.width < 1 || std::abs(rows - std::round(rows)) > 1e-6 * rows) {
    throw std::invalid_argument(fmt::format("{}: its first bucket of {} bytes is no embedding of rows of {} floats",
                                            where, e.block_bytes, e.width));
  }
  return e;
}

/// The case's hierarchy and sharding, each refused naming the case where dlscale-project does
/// not simulate it.
void read_patterns(const RecordedCase& r, CaseInputs& c) {
  const CaseDescription& d = r.description;
  if (!r.lacks("allreduce_hierarchy") && d.allreduce_hierarchy != "flat" && d.allreduce_hierarchy != "host") {
    throw std::invalid_argument(
        fmt::format("{}: allreduce_hierarchy {} is neither flat nor host", r.where, d.allreduce_hierarchy));
  }
  c.host_hierarchy = !r.lacks("allreduce_hierarchy") && d.allreduce_hierarchy == "host";
  c.sharded = !r.lacks("sharding") && d.sharding != "none";
  if (c.sharded && d.sharding != "optimizer") {
    throw std::invalid_argument(
        fmt::format("{}: sharding {} is not one dlscale-project simulates", r.where, d.sharding));
  }
}

/// One compute sample per rank and iteration from phase_time_s[rank][iteration] = forward,
/// backward, all-reduce, update: the all-reduce is what the simulation replaces, and with
/// `gathered` (a sharded case on more than one rank) the update's all-gather too, the network's
/// part of that phase (parameter_gather_s, checked within 0 and the update).
std::vector<ComputeSample> compute_samples(const CaseRecord& record, const std::string& where, bool gathered) {
  const size_t expected = record.phase_time_s.size();
  if (gathered && record.parameter_gather_s.size() != expected / 4) {
    throw std::invalid_argument(fmt::format("{}: parameter_gather_s has {} values, not ranks x iterations = {}", where,
                                            record.parameter_gather_s.size(), expected / 4));
  }
  std::vector<ComputeSample> samples;
  for (size_t k = 0; k < expected; k += 4) {
    const double update = record.phase_time_s[k + 3], gather = gathered ? record.parameter_gather_s[k / 4] : 0.0;
    if (gathered && !(gather >= 0 && gather <= update)) {
      throw std::invalid_argument(fmt::format(
          "{}: parameter_gather_s holds {} s, not within 0 and its update phase's {} s", where, gather, update));
    }
    samples.push_back({record.phase_time_s[k], record.phase_time_s[k + 1], update - gather});
  }
  return samples;
}

}  // namespace

double gathered_rows_bytes(const SparseEmbedding& e, int measured_ranks, int ranks, bool strong) {
  const double share =
      strong ? std::min(1.0, e.rows_share * measured_ranks / static_cast<double>(ranks)) : e.rows_share;
  const double width = e.width;
  const double vocabulary = e.block_bytes / 4 / width;
  const double values = ranks * share * vocabulary * (width + 1);
  // Dense round the ring as dlscale decides: from the crossover share on, or where the rows are
  // more values than one MPI call takes.
  if (share >= 2 * width / (ranks * (width + 1)) || values > std::numeric_limits<int>::max()) return 0;
  return values * 4;
}

CaseInputs case_inputs(const std::string& name, const CaseRecord& record, const Attrs& software_attrs) {
  const std::string where = "case " + name;
  const RecordedCase r = recorded_case(record, where);
  const CaseDescription& d = r.description;
  for (const char* required : {name_of<&CaseDescription::hosts>(kCaseDescriptionFields),
                               name_of<&CaseDescription::bucket_mb>(kCaseDescriptionFields),
                               name_of<&CaseDescription::grad_bytes>(kCaseDescriptionFields),
                               name_of<&CaseOutcome::overlap>(kCaseOutcomeFields),
                               name_of<&StepStatistics::step_median_s>(kStepStatisticsFields)}) {
    r.require(required);
  }
  SoftwareRecord software;
  read_fields(software_attrs, kSoftwareFields, software);
  CaseInputs c;
  c.name = name;
  c.measured_ranks = static_cast<int>(record.ranks);
  c.hosts = static_cast<int>(d.hosts);
  if (c.measured_ranks < 1 || c.hosts < 1 || c.hosts > c.measured_ranks) {
    throw std::invalid_argument(fmt::format("{}: {} ranks on {} hosts", where, c.measured_ranks, c.hosts));
  }
  if (d.scaling != "weak" && d.scaling != "strong") {
    throw std::invalid_argument(fmt::format("{}: scaling {} is neither weak nor strong", where, d.scaling));
  }
  c.strong = d.scaling == "strong";
  const bool bucketed = d.bucket_mb > 0;
  read_mechanism(r, software, bucketed, c);
  // A case that reduced nothing (one rank) made no buckets to overlap; at more ranks its buckets
  // would: every driver reports its gradients during backward (Model::set_gradient_ready_callback).
  const bool reduced_nothing = r.outcome.allreduce_mechanism == "none";
  c.overlap = (r.outcome.overlap || (reduced_nothing && bucketed)) && c.progressed_by_thread;
  c.measured_step_s = r.summary.step_median_s;
  c.label = fmt::format("{}, {}, {} scaling, {} rank{} on {} host{}", d.workload.empty() ? "?" : d.workload,
                        d.driver.empty() ? "?" : d.driver, d.scaling, c.measured_ranks,
                        c.measured_ranks == 1 ? "" : "s", c.hosts, c.hosts == 1 ? "" : "s");
  const size_t expected = static_cast<size_t>(record.ranks) * static_cast<size_t>(record.iterations) * 4;
  if (record.phase_time_s.size() != expected || expected == 0) {
    throw std::invalid_argument(fmt::format("{}: phase_time_s has {} values, not ranks x iterations x 4 = {}", where,
                                            record.phase_time_s.size(), expected));
  }
  read_patterns(r, c);
  c.samples = compute_samples(record, where, c.sharded && c.measured_ranks > 1);
  try {
    // The buckets the case reduced, where its file records them (bucket_bytes); else as dlscale
    // would cut its gradients without knowing its layers.
    c.buckets = record.bucket_bytes.empty() ? estimated_buckets(static_cast<double>(d.grad_bytes), d.bucket_mb)
                                            : recorded_buckets(record.bucket_bytes);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(where + ": " + e.what());
  }
  c.readiness_measured = apply_measured_readiness(record, c.buckets);
  if (c.sharded) {
    const double scale = parameter_scale(record);
    for (GradientBucket& b : c.buckets) b.parameter_bytes = b.bytes * scale;
  }
  c.sparse = sparse_embedding(record, r, where);
  to_wire_bytes(d.grad_compression, where, c.sparse.has_value(), c.buckets);
  return c;
}

bool apply_measured_readiness(const CaseRecord& record, std::vector<GradientBucket>& buckets) {
  const auto n = static_cast<size_t>(record.buckets);
  const auto ranks = static_cast<size_t>(record.ranks), iters = static_cast<size_t>(record.iterations);
  if (n == 0 || n != buckets.size() || record.bucket_start_s.size() != ranks * iters * n ||
      record.phase_time_s.size() != ranks * iters * 4) {
    return false;
  }
  double earlier = 0;
  // Readiness order is the buffer's last bucket first (BucketedAllreduce starts them so).
  for (size_t k = 0; k < n; ++k) {
    const size_t bucket = n - 1 - k;
    std::vector<double> fractions;
    for (size_t ri = 0; ri < ranks * iters; ++ri) {
      const double forward = record.phase_time_s[ri * 4], backward = record.phase_time_s[ri * 4 + 1];
      const double start = record.bucket_start_s[ri * n + bucket];
      if (backward > 0) fractions.push_back(std::clamp((start - forward) / backward, 0.0, 1.0));
    }
    if (fractions.empty()) return false;
    // The usual median (the mean of the two middle values of an even count), as docs/metrics.md's.
    std::sort(fractions.begin(), fractions.end());
    const size_t mid = fractions.size() / 2;
    const double median = fractions.size() % 2 ? fractions[mid] : (fractions[mid - 1] + fractions[mid]) / 2;
    // A fraction of 0 would be a bucket ready before backward began: the simulator wants (0, 1].
    earlier = std::max({earlier, median, 1e-9});
    buckets[k].ready_fraction = earlier;
  }
  return true;
}

namespace {

/// The ring fits of a case's /projection group, one standing in for the other where it was not
/// measured (as ProjectionNetwork does), and which did.
struct MeasuredFits {
  double within_alpha, within_beta, between_alpha, between_beta;
  const char* stand_in;
};

MeasuredFits measured_fits(const Attrs& attrs, const std::string& group) {
  ProjectionRecord fit;
  // A fit the group lacks stays NaN: not measured.
  fit.within_alpha_s = fit.within_beta_s_per_byte = fit.between_alpha_s = fit.between_beta_s_per_byte =
      std::numeric_limits<double>::quiet_NaN();
  try {
    read_fields(attrs, kProjectionFields, fit);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(group + ": " + e.what());
  }
  MeasuredFits f{fit.within_alpha_s, fit.within_beta_s_per_byte, fit.between_alpha_s, fit.between_beta_s_per_byte, ""};
  f.stand_in = std::isnan(f.within_alpha)    ? "within a host the between-host fit (no within-host figures measured)"
               : std::isnan(f.between_alpha) ? "between hosts the within-host fit (no between-host figures measured)"
                                             : "the within- and between-host fits as measured";
  if (std::isnan(f.within_alpha)) {
    f.within_alpha = f.between_alpha;
    f.within_beta = f.between_beta;
  }
  if (std::isnan(f.between_alpha)) {
    f.between_alpha = f.within_alpha;
    f.between_beta = f.within_beta;
  }
  if (std::isnan(f.within_alpha) || std::isnan(f.within_beta)) {
    throw std::invalid_argument(fmt::format("{} has no measured fit", group));
  }
  return f;
}

}  // namespace

MeasuredPlatform measured_platform(const ResultsFile& file, const CaseInputs& c, int max_ranks) {
  const std::string group = "cases/" + c.name + "/projection";
  const std::vector<std::string> children = file.group_names("cases/" + c.name);
  if (std::find(children.begin(), children.end(), "projection") == children.end()) {
    throw std::invalid_argument(
        fmt::format("case {} has no all-reduce figures to build --platform measured from (no /{}: a one-rank case, "
                    "or one whose all-reduce microbenchmark did not run)",
                    c.name, group));
  }
  const MeasuredFits fits = measured_fits(file.read_attrs(group), group);
  const double wa = fits.within_alpha, wb = fits.within_beta, ba = fits.between_alpha, bb = fits.between_beta;
  const char* stand_in = fits.stand_in;
  // The ring fit says a ring of P ranks takes 2(P-1) alpha + 2(P-1)/P n beta. The simulated
  // ring on a crossbar takes 2(P-1) a + 2(P-1)/P n / B, a and B the latency and bandwidth of
  // its slowest edge's route (analytic_model.h). Within a node that route is device -> node
  // switch -> device: a = 2 x intra-node latency, B = intra-node bandwidth; between nodes it
  // adds NIC -> switch -> NIC: a = 2 x intra-node + 2 x NIC latency, B = the smaller of the
  // two bandwidths. So intra-node latency = alpha_within / 2, bandwidth = 1 / beta_within; NIC
  // latency = (alpha_between - alpha_within) / 2, bandwidth = 1 / beta_between. A between-host
  // fit faster than the within-host one cannot be built this way: its latency difference is
  // taken as 0 and its bandwidth is capped by the intra-node link's.
  const auto gbps = [](double beta) {
    // A fit of beta 0 (bandwidth too high to tell apart from 0 s/byte): a link far faster than any other.
    return beta > 0 ? 1 / beta / 1e9 : 1e6;
  };
  const int per_node = (c.measured_ranks + c.hosts - 1) / c.hosts;
  const int nodes = std::max(1, (max_ranks + per_node - 1) / per_node);
  MeasuredPlatform platform;
  if (max_ranks > c.measured_ranks) {
    platform.extrapolation = fmt::format(
        "--platform measured extrapolates case {}'s all-reduce on {} rank{} on {} host{} to {} nodes of {}: every "
        "node and link as fast as measured there, and {}",
        c.name, c.measured_ranks, c.measured_ranks == 1 ? "" : "s", c.hosts, c.hosts == 1 ? "" : "s", nodes, per_node,
        stand_in);
  }
  platform.toml = fmt::format(
      "# The all-reduce of case {0} as measured (/{1}): ring fits within a host (alpha {2} s, beta {3} s/B)\n"
      "# and between hosts (alpha {4} s, beta {5} s/B) turned into links whose simulated ring takes\n"
      "# 2(P-1) alpha + 2(P-1)/P n beta (docs/projection.md, \"The measured platform\").\n"
      "name = \"measured-case-{0}\"\n"
      "nodes = {6}\n"
      "devices_per_node = {7}\n"
      "placement = \"block\"\n\n"
      "[intra_node]\nbandwidth_GBps = {8}\nlatency_us = {9}\n\n"
      "[nic]\ncount = 1\nbandwidth_GBps = {10}\nlatency_us = {11}\n\n"
      "[fabric]\ntopology = \"star\"\n",
      c.name, group, wa, wb, ba, bb, nodes, per_node, gbps(wb), wa / 2 * 1e6, gbps(bb),
      std::max(0.0, ba - wa) / 2 * 1e6);
  return platform;
}

}  // namespace dlscale::project
