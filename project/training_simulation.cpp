#include "project/training_simulation.h"

#include <fmt/format.h>
// SG_BEGIN_DECL and XBT_PUBLIC, which simgrid/version.h uses without including them.
#include <xbt/base.h>
//
#include <simgrid/version.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <stdexcept>

#include "project/allreduce_simulation.h"
#include "project/isolated_run.h"

namespace dlscale::project {
namespace {

void check_inputs(const ClusterDescription& cluster, const TrainingInputs& in) {
  nodes_for_ranks(cluster, in.ranks);  // throws for a P the platform cannot hold
  if (in.samples.empty()) throw std::invalid_argument("training simulation: no compute samples");
  if (in.lanes < 1) throw std::invalid_argument(fmt::format("training simulation: {} all-reduce lanes", in.lanes));
  for (const ComputeSample& c : in.samples) {
    for (double t : {c.forward_s, c.backward_s, c.update_s}) {
      if (!std::isfinite(t) || t < 0) {
        throw std::invalid_argument(fmt::format("training simulation: compute sample time {} is not >= 0", t));
      }
    }
  }
  double previous = 0;
  for (const GradientBucket& b : in.buckets) {
    if (!std::isfinite(b.bytes) || b.bytes <= 0) {
      throw std::invalid_argument(fmt::format("training simulation: bucket of {} bytes", b.bytes));
    }
    if (!(b.ready_fraction > 0 && b.ready_fraction <= 1) || b.ready_fraction < previous) {
      throw std::invalid_argument(
          fmt::format("training simulation: bucket ready fractions must rise within (0, 1], got {} after {}",
                      b.ready_fraction, previous));
    }
    previous = b.ready_fraction;
    if (!std::isfinite(b.gathered_bytes) || b.gathered_bytes < 0 || !std::isfinite(b.parameter_bytes) ||
        b.parameter_bytes < 0) {
      throw std::invalid_argument(fmt::format("training simulation: {} bytes of rows gathered, {} of parameters",
                                              b.gathered_bytes, b.parameter_bytes));
    }
    if (b.gathered_bytes > 0 && !b.rows) {
      throw std::invalid_argument("training simulation: rows gathered for a bucket that is not an embedding's rows");
    }
    if (b.rows && in.algorithm != AllreduceAlgorithm::ring) {
      throw std::invalid_argument("training simulation: an embedding's rows are all-gathered round a ring");
    }
  }
  if (in.steps < 1) throw std::invalid_argument(fmt::format("training simulation: {} steps", in.steps));
  if (in.host_hierarchy &&
      (in.algorithm != AllreduceAlgorithm::ring || in.model != AllreduceModel::flow || in.sharded)) {
    throw std::invalid_argument(
        "training simulation: the two-level all-reduce is simulated with the ring's flow model, unsharded");
  }
  if (in.sharded && in.algorithm != AllreduceAlgorithm::ring) {
    throw std::invalid_argument("training simulation: a sharded optimiser's reduce-scatter and all-gather are rings");
  }
}

/// `gathered`: sharded, when each rank's parameters' all-gather ends; else empty.
StepBreakdown breakdown(const std::vector<double>& fb, const std::vector<double>& update,
                        const std::vector<double>& reduced, const std::vector<double>& gathered) {
  const size_t p = fb.size();
  double sum_fb = 0, max_fb = 0, max_ar = 0, updated = 0, step = 0;
  for (size_t r = 0; r < p; ++r) {
    // A rank's all-reduce phase cannot end before its backward does (it waits on the last bucket after it).
    const double ar = std::max(fb[r], reduced[r]);
    sum_fb += fb[r];
    max_fb = std::max(max_fb, fb[r]);
    max_ar = std::max(max_ar, ar);
    updated = std::max(updated, ar + update[r]);
    step = std::max(step, gathered.empty() ? ar + update[r] : std::max(ar + update[r], gathered[r]));
  }
  StepBreakdown s;
  s.step_s = step;
  s.compute_s = sum_fb / static_cast<double>(p);
  s.straggler_wait_s = max_fb - s.compute_s;
  s.exposed_allreduce_s = max_ar - max_fb;
  s.update_and_other_s = step - max_ar;
  s.parameter_gather_s = step - updated;
  return s;
}

/// The schedule's network: the collectives, the buckets and where the ranks are (not yet when
/// each rank has each bucket).
AllreduceSchedule network_schedule(const ClusterDescription& cluster, const TrainingInputs& in) {
  AllreduceSchedule schedule;
  schedule.ranks = in.ranks;
  schedule.steps = in.steps;
  schedule.algorithm = in.algorithm;
  schedule.model = in.model;
  schedule.lanes = in.lanes;
  schedule.sharded = in.sharded;
  schedule.host_hierarchy = in.host_hierarchy;
  if (in.host_hierarchy) {
    for (int r = 0; r < in.ranks; ++r) schedule.node_of.push_back(place_rank(cluster, in.ranks, r).node);
  }
  for (const GradientBucket& b : in.buckets) {
    schedule.bucket_bytes.push_back(b.bytes);
    schedule.rows.push_back(b.rows ? 1 : 0);
    schedule.gathered_bytes.push_back(b.gathered_bytes);
    schedule.parameter_bytes.push_back(b.parameter_bytes > 0 ? b.parameter_bytes : b.bytes);
  }
  return schedule;
}

/// Each part averaged over the simulated steps.
StepBreakdown mean_of(const std::vector<StepBreakdown>& steps) {
  StepBreakdown mean;
  const auto n = static_cast<double>(steps.size());
  for (const StepBreakdown& s : steps) {
    mean.step_s += s.step_s / n;
    mean.compute_s += s.compute_s / n;
    mean.straggler_wait_s += s.straggler_wait_s / n;
    mean.exposed_allreduce_s += s.exposed_allreduce_s / n;
    mean.update_and_other_s += s.update_and_other_s / n;
    mean.parameter_gather_s += s.parameter_gather_s / n;
  }
  return mean;
}

}  // namespace

TrainingSimulation simulate_training(const ClusterDescription& cluster, const TrainingInputs& in) {
  check_inputs(cluster, in);
  const auto started = std::chrono::steady_clock::now();
  const size_t p = static_cast<size_t>(in.ranks), nb = in.buckets.size();

  // Each rank's compute in each step, drawn from the samples; from it, when each bucket is ready.
  std::mt19937_64 rng(in.seed);
  std::uniform_int_distribution<size_t> pick(0, in.samples.size() - 1);
  std::vector<double> fb(p * in.steps), update(p * in.steps);
  AllreduceSchedule schedule = network_schedule(cluster, in);
  schedule.ready_s.resize(p * in.steps * nb);
  for (size_t i = 0; i < p * in.steps; ++i) {
    const ComputeSample& c = in.samples[pick(rng)];
    fb[i] = c.forward_s + c.backward_s;
    update[i] = c.update_s;
    if (in.sharded) {
      schedule.backward_end_s.push_back(fb[i]);
      schedule.update_s.push_back(c.update_s);
    }
    for (size_t b = 0; b < nb; ++b) {
      schedule.ready_s[i * nb + b] = in.overlap ? c.forward_s + in.buckets[b].ready_fraction * c.backward_s : fb[i];
    }
  }

  TrainingSimulation result;
  std::vector<double> reduced(p * in.steps, 0.0), gathered;
  if (in.ranks > 1 && nb > 0) {
    // The child sends back one list: the reductions' ends, then (sharded) the all-gathers'.
    IsolatedResult run = run_isolated([&] {
      AllreduceTimes times = simulate_allreduces(cluster, schedule);
      times.reduced.insert(times.reduced.end(), times.gathered.begin(), times.gathered.end());
      return times.reduced;
    });
    const size_t expected = reduced.size() * (in.sharded ? 2 : 1);
    if (run.values.size() != expected) {
      throw std::runtime_error(
          fmt::format("the simulation returned {} times, expected {}", run.values.size(), expected));
    }
    const auto half = static_cast<std::ptrdiff_t>(reduced.size());
    reduced.assign(run.values.begin(), run.values.begin() + half);
    gathered.assign(run.values.begin() + half, run.values.end());
    result.peak_rss_bytes = run.peak_rss_bytes;
  }

  for (int s = 0; s < in.steps; ++s) {
    const auto part = [&](const std::vector<double>& v) {
      return std::vector<double>(v.begin() + static_cast<std::ptrdiff_t>(s * p),
                                 v.begin() + static_cast<std::ptrdiff_t>((s + 1) * p));
    };
    result.steps.push_back(
        breakdown(part(fb), part(update), part(reduced), gathered.empty() ? gathered : part(gathered)));
  }
  result.mean = mean_of(result.steps);
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

std::string simgrid_version() {
  // The library's own numbers, not the headers': the projection records what simulated it.
  int major = 0, minor = 0, patch = 0;
  sg_version_get(&major, &minor, &patch);
  return fmt::format("{}.{}.{}", major, minor, patch);
}

}  // namespace dlscale::project
