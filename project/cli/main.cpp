// dlscale-project: the training step of a results file's cases projected to other rank counts
// by simulating the cluster with SimGrid (docs/projection.md, "dlscale-project"). A binary of
// its own, not a dlscale subcommand: dlscale is an MPI program, and every simulation forks a
// child (isolated_run.h), which MPI libraries do not allow their processes to do safely.
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "io/results_file.h"
#include "project/cli/case_inputs.h"
#include "project/platform.h"
#include "project/training_simulation.h"
#include "schema/simulation_record.h"
#include "suite/errors.h"
#include "suite/exit_code.h"
#include "suite/process/read_guard.h"

namespace dlscale::project {
namespace {

/// Default rank counts: powers of two up to this (and never above the platform's devices).
constexpr int kDefaultMaxRanks = 8192;
/// The message model simulates 2P(P-1) messages per bucket: beyond this P it runs for hours.
constexpr int kMaxMessageModelRanks = 256;

struct Options {
  std::string results, platform = "measured", ranks, allreduce, hierarchy, model = "flow", seed = "1";
  std::vector<std::string> cases;
  int steps = 3;
  bool dry_run = false;
  bool ranks_given = false;
};

/// A platform and the TOML or SimGrid XML text it was read from (recorded with the projection).
struct Platform {
  ClusterDescription cluster;
  std::string toml, xml;
};

/// One case to simulate, checked.
struct Job {
  CaseInputs inputs;
  Platform platform;
  std::string extrapolation;  ///< what --platform measured extrapolates from (MeasuredPlatform)
  std::vector<int> ranks;     ///< ascending, with 1 and the measured P
};

struct Point {
  int ranks = 0;
  StepBreakdown step;
  double efficiency = 0;
  double embedding_rows_bytes = 0;  ///< the embedding's rows all-gathered; 0: none, or dense
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (!in || !(text << in.rdbuf())) throw UsageError(fmt::format("--platform {}: cannot be read", path));
  return text.str();
}

/// Where presets are looked for by name: the source tree's project/platforms (a build), then
/// share/dlscale/platforms beside the binary's bin folder (an installation).
std::vector<std::string> preset_dirs() {
  std::vector<std::string> dirs = {DLSCALE_PLATFORM_SOURCE_DIR};
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    const std::string path(exe, static_cast<size_t>(n));
    dirs.push_back(path.substr(0, path.rfind('/')) + "/../share/dlscale/platforms");
  }
  return dirs;
}

bool ends_with(const std::string& text, const std::string& end) {
  return text.size() >= end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
}

Platform load_preset(const std::string& arg) {
  Platform p;
  if (ends_with(arg, ".xml")) {
    p.xml = read_text(arg);
    try {
      p.cluster = load_simgrid_platform_file(arg);
    } catch (const std::invalid_argument& e) {
      throw UsageError(fmt::format("--platform {}", e.what()));
    }
    return p;
  }
  // A path names a file; a bare name, a preset.
  std::string path = arg;
  if (arg.find('/') == std::string::npos && arg.size() > 0 && arg.find(".toml") == std::string::npos) {
    path.clear();
    for (const std::string& dir : preset_dirs()) {
      if (std::ifstream(dir + "/" + arg + ".toml")) {
        path = dir + "/" + arg + ".toml";
        break;
      }
    }
    if (path.empty()) {
      throw UsageError(fmt::format("--platform {}: no such preset in {} (or give a TOML file's path, or measured)", arg,
                                   fmt::join(preset_dirs(), " or ")));
    }
  }
  p.toml = read_text(path);
  try {
    p.cluster = parse_platform_toml(p.toml, path);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--platform {}", e.what()));
  }
  return p;
}

std::vector<int> parse_ranks(const std::string& text) {
  std::vector<int> out;
  std::string item;
  std::istringstream in(text);
  while (true) {
    const bool more = static_cast<bool>(std::getline(in, item, ','));
    if (!more && !out.empty() && text.back() != ',') break;
    if (item.empty() || item.size() > 7 || item.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(item) < 1) {
      throw UsageError(fmt::format("--ranks {}: {} is not a rank count (comma-separated integers from 1)", text,
                                   item.empty() ? "an empty item" : "'" + item + "'"));
    }
    if (std::find(out.begin(), out.end(), std::stoi(item)) != out.end()) {
      throw UsageError(fmt::format("--ranks {}: {} is listed twice", text, item));
    }
    out.push_back(std::stoi(item));
    if (!more || in.eof()) break;
  }
  return out;
}

AllreduceAlgorithm parse_algorithm(const std::string& text) {
  if (text == "ring") return AllreduceAlgorithm::ring;
  if (text == "binomial") return AllreduceAlgorithm::binomial;
  throw UsageError(fmt::format("--allreduce {}: must be ring or binomial", text));
}

const char* algorithm_name(AllreduceAlgorithm a) { return a == AllreduceAlgorithm::binomial ? "binomial" : "ring"; }

/// --allreduce-hierarchy: whether the all-reduce goes in two levels where ranks share a node.
bool parse_host_hierarchy(const std::string& text) {
  if (text == "flat") return false;
  if (text == "host") return true;
  throw UsageError(fmt::format("--allreduce-hierarchy {}: must be flat or host", text));
}

AllreduceModel parse_model(const std::string& text) {
  if (text == "flow") return AllreduceModel::flow;
  if (text == "message") return AllreduceModel::message;
  throw UsageError(fmt::format("--model {}: must be flow or message", text));
}

/// Digits only (CLI11 would take -1 for an unsigned option as 2^64 - 1), and within int64, as recorded.
uint64_t parse_seed(const std::string& text) {
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos) {
    throw UsageError(fmt::format("--seed {}: not an integer from 0 to 10^18 - 1", text));
  }
  return std::stoull(text);
}

std::string case_name(const std::string& arg, const std::vector<std::string>& names) {
  if (arg.empty() || arg.size() > 6 || arg.find_first_not_of("0123456789") != std::string::npos) {
    throw UsageError(fmt::format("--case {}: not a case number (0000, 0001, ...)", arg));
  }
  const std::string name = fmt::format("{:04d}", std::stoi(arg));
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    throw UsageError(fmt::format("--case {}: no such case (the file has {})", arg,
                                 names.empty() ? "none" : fmt::format("{} to {}", names.front(), names.back())));
  }
  return name;
}

/// The cases `--case` names, each once.
std::vector<std::string> named_cases(const std::vector<std::string>& args, const std::vector<std::string>& names) {
  std::vector<std::string> chosen;
  for (const std::string& arg : args) {
    const std::string name = case_name(arg, names);
    if (std::find(chosen.begin(), chosen.end(), name) != chosen.end()) {
      throw UsageError(fmt::format("--case {}: named twice", arg));
    }
    chosen.push_back(name);
  }
  return chosen;
}

/// The rank counts a case is projected to: 1, its own, and `requested` (by default powers of two
/// up to kDefaultMaxRanks), each checked against the platform's devices and the model's limit.
std::vector<int> projected_ranks(const Job& job, const std::vector<int>& requested, AllreduceModel model,
                                 const std::string& name) {
  const ClusterDescription& cluster = job.platform.cluster;
  const int devices = cluster.nodes * cluster.devices_per_node;
  std::vector<int> ranks = {1, job.inputs.measured_ranks};
  if (requested.empty()) {
    for (int p = 2; p <= std::min(kDefaultMaxRanks, devices); p *= 2) ranks.push_back(p);
  } else {
    ranks.insert(ranks.end(), requested.begin(), requested.end());
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  if (ranks.back() > devices) {
    throw UsageError(fmt::format("case {}: P = {} exceeds the {} devices of platform {} ({} nodes of {})", name,
                                 ranks.back(), devices, cluster.name, cluster.nodes, cluster.devices_per_node));
  }
  if (job.inputs.algorithm == AllreduceAlgorithm::ring && model == AllreduceModel::message &&
      ranks.back() > kMaxMessageModelRanks) {
    throw UsageError(
        fmt::format("--model message: P = {} is above {} (2P(P-1) messages per bucket); give "
                    "--ranks up to {} or use the flow model",
                    ranks.back(), kMaxMessageModelRanks, kMaxMessageModelRanks));
  }
  return ranks;
}

/// The all-reduce and hierarchy the case ran, unless --allreduce or --allreduce-hierarchy asks
/// "what if"; a combination the simulation does not have is refused naming the case.
void ask_what_if(const Options& o, AllreduceModel model, CaseInputs& c) {
  if (!o.allreduce.empty()) c.algorithm = parse_algorithm(o.allreduce);
  if (!o.hierarchy.empty()) c.host_hierarchy = parse_host_hierarchy(o.hierarchy);
  if (c.host_hierarchy && (c.algorithm != AllreduceAlgorithm::ring || model != AllreduceModel::flow || c.sharded)) {
    throw std::invalid_argument(fmt::format(
        "case {}: the two-level all-reduce (allreduce_hierarchy host) is simulated with the ring's flow model, "
        "unsharded; give --allreduce-hierarchy flat to simulate the flat ring",
        c.name));
  }
  if (c.sparse && c.algorithm != AllreduceAlgorithm::ring) {
    throw std::invalid_argument(
        fmt::format("case {}: its embedding's rows are gathered round a ring; --allreduce {} cannot simulate it",
                    c.name, o.allreduce));
  }
  if (c.sharded && c.algorithm != AllreduceAlgorithm::ring) {
    throw std::invalid_argument(
        fmt::format("case {}: a sharded optimiser reduce-scatters and all-gathers round a ring; --allreduce {} cannot "
                    "simulate it",
                    c.name, o.allreduce));
  }
}

/// Every check, before anything is simulated or written. `notes`: why each case left out was,
/// printed only once every check has passed, so that an error is the only line of a refused run.
std::vector<Job> plan(const Options& o, const ResultsFile& file, std::vector<std::string>* notes) {
  const std::vector<int> requested = o.ranks_given ? parse_ranks(o.ranks) : std::vector<int>{};
  if (!o.allreduce.empty()) parse_algorithm(o.allreduce);
  if (!o.hierarchy.empty()) parse_host_hierarchy(o.hierarchy);
  const AllreduceModel model = parse_model(o.model);
  if (o.steps < 1 || o.steps > 1000) throw UsageError(fmt::format("--steps {}: must be 1 to 1000", o.steps));
  parse_seed(o.seed);
  const bool measured = o.platform == "measured";
  const Platform preset = measured ? Platform{} : load_preset(o.platform);

  const std::vector<std::string> names = file.case_names();
  // The run's MPI thread level, which files older than the per-case all-reduce mechanism need.
  const std::vector<std::string> system = file.group_names("system");
  const Attrs software = std::find(system.begin(), system.end(), "software") != system.end()
                             ? file.read_attrs("system/software")
                             : Attrs{};
  const bool named = !o.cases.empty();
  const std::vector<std::string> chosen = named ? named_cases(o.cases, names) : names;

  std::vector<Job> jobs;
  for (const std::string& name : chosen) {
    Job job;
    try {
      const CaseRecord record = file.read_case(name);
      const std::string reason = unusable_reason(record);
      if (!reason.empty()) throw std::invalid_argument(fmt::format("case {}: {}", name, reason));
      job.inputs = case_inputs(name, record, software);
      ask_what_if(o, model, job.inputs);
      const int largest =
          std::max({requested.empty() ? kDefaultMaxRanks : *std::max_element(requested.begin(), requested.end()),
                    job.inputs.measured_ranks, 1});
      if (measured) {
        MeasuredPlatform platform = measured_platform(file, job.inputs, largest);
        job.platform.toml = std::move(platform.toml);
        job.extrapolation = std::move(platform.extrapolation);
        job.platform.cluster = parse_platform_toml(job.platform.toml, "measured platform of case " + name);
      } else {
        job.platform = preset;
      }
    } catch (const std::invalid_argument& e) {
      if (named) throw UsageError(e.what());
      notes->push_back(fmt::format("dlscale-project: {}: skipped", e.what()));
      continue;
    }
    job.ranks = projected_ranks(job, requested, model, name);
    jobs.push_back(std::move(job));
  }
  if (jobs.empty()) {
    throw UsageError(fmt::format("{}: no case to project (one needs mode timing, status ok and --phases)", o.results));
  }
  return jobs;
}

/// When the buckets are reduced, as the header lines say it.
const char* bucket_timing(const CaseInputs& c) {
  if (c.overlap) return "overlapped";
  return c.progressed_by_thread ? "after backward" : "after backward: no communication thread to progress them";
}

/// The case's header lines and the table's column names.
void print_header(const Job& job, const Options& o) {
  const std::string collectives =
      job.inputs.sharded          ? " reduce-scatter and all-gather (sharded optimiser)"
      : job.inputs.host_hierarchy ? " all-reduce in two levels (each node's ranks to its first, a ring of those, back)"
                                  : " all-reduce";
  std::string compute =
      job.inputs.strong ? "forward and backward scaled by measured P / P (strong scaling)" : "compute as measured";
  if (job.inputs.sharded) compute += ", the update of the share scaled by measured P / P";
  if (job.inputs.sparse) compute += ", the embedding's rows all-gathered where fewer bytes than its block";
  std::printf(
      "\ncase %s (%s) on %s: %s%s, %s model, %d steps, seed %s, %zu bucket%s (%s), %s\n", job.inputs.name.c_str(),
      job.inputs.label.c_str(), job.platform.cluster.name.c_str(),
      (std::string(algorithm_name(job.inputs.algorithm)) + (o.allreduce.empty() ? " (as recorded)" : "")).c_str(),
      collectives.c_str(), o.model.c_str(), o.steps, o.seed.c_str(), job.inputs.buckets.size(),
      job.inputs.buckets.size() == 1 ? "" : "s", bucket_timing(job.inputs), compute.c_str());
  if (!job.extrapolation.empty()) std::printf("%s\n", job.extrapolation.c_str());
  std::printf("%6s %10s %10s %11s %17s %21s %10s%s\n", "P", "step ms", "efficiency", "compute ms", "straggler wait ms",
              "exposed all-reduce ms", "update ms", job.inputs.sharded ? "  of which all-gather ms" : "");
}

/// What simulate_training takes for the case at P = `p`.
TrainingInputs training_inputs(const Job& job, const Options& o, int p) {
  TrainingInputs in;
  in.ranks = p;
  in.buckets = job.inputs.buckets;
  if (job.inputs.sparse) {
    in.buckets.back().rows = true;
    in.buckets.back().gathered_bytes =
        gathered_rows_bytes(*job.inputs.sparse, job.inputs.measured_ranks, p, job.inputs.strong);
  }
  in.overlap = job.inputs.overlap;
  in.algorithm = job.inputs.algorithm;
  in.lanes = job.inputs.lanes;
  in.model = parse_model(o.model);
  in.steps = o.steps;
  in.seed = parse_seed(o.seed);
  in.sharded = job.inputs.sharded;
  in.host_hierarchy = job.inputs.host_hierarchy;
  // Strong scaling keeps the global batch: each of P ranks does measured P / P of a measured
  // rank's forward and backward. The update touches every parameter whatever the batch, so
  // it stays as measured; a sharded one touches the rank's share, measured P / P of the
  // measured rank's.
  const double ratio = static_cast<double>(job.inputs.measured_ranks) / p;
  const double share = job.inputs.strong ? ratio : 1.0, update_share = job.inputs.sharded ? ratio : 1.0;
  for (const ComputeSample& s : job.inputs.samples) {
    in.samples.push_back({s.forward_s * share, s.backward_s * share, s.update_s * update_share});
  }
  return in;
}

std::vector<Point> simulate(const Job& job, const Options& o) {
  print_header(job, o);
  std::fflush(stdout);
  std::vector<Point> points;
  for (int p : job.ranks) {
    const TrainingInputs in = training_inputs(job, o, p);
    Point point;
    point.ranks = p;
    if (job.inputs.sparse && p > 1) point.embedding_rows_bytes = in.buckets.back().gathered_bytes;
    try {
      point.step = simulate_training(job.platform.cluster, in).mean;
    } catch (const std::exception& e) {
      throw std::runtime_error(fmt::format("case {} at P = {}: {}", job.inputs.name, p, e.what()));
    }
    // As docs/metrics.md defines it, against the simulated one-rank step (the first point).
    const double t1 = points.empty() ? point.step.step_s : points.front().step.step_s;
    point.efficiency = job.inputs.strong ? t1 / (p * point.step.step_s) : t1 / point.step.step_s;
    const StepBreakdown& b = point.step;
    std::printf("%6d %10.3f %10.3f %11.3f %17.3f %21.3f %10.3f", p, b.step_s * 1e3, point.efficiency, b.compute_s * 1e3,
                b.straggler_wait_s * 1e3, b.exposed_allreduce_s * 1e3, b.update_and_other_s * 1e3);
    if (job.inputs.sharded) std::printf(" %23.3f", b.parameter_gather_s * 1e3);
    std::printf("\n");
    std::fflush(stdout);
    points.push_back(point);
  }
  return points;
}

GroupRecord simulation_group(const Job& job, const std::vector<Point>& points, const Options& o, double* error) {
  const auto measured =
      std::find_if(points.begin(), points.end(), [&](const Point& p) { return p.ranks == job.inputs.measured_ranks; });
  *error = measured->step.step_s / job.inputs.measured_step_s - 1;
  SimulationRecord rec;
  rec.simgrid_version = simgrid_version();
  rec.platform = job.platform.cluster.name;
  rec.platform_toml = job.platform.toml;
  rec.platform_xml = job.platform.xml;
  rec.placement = placement_name(job.platform.cluster);
  rec.allreduce = algorithm_name(job.inputs.algorithm);
  rec.sharding = job.inputs.sharded ? "optimizer" : "none";
  rec.allreduce_hierarchy = job.inputs.host_hierarchy ? "host" : "flat";
  rec.allreduce_source = o.allreduce.empty() ? "recorded" : "--allreduce";
  rec.model = o.model;
  rec.steps = o.steps;
  rec.seed = static_cast<int64_t>(parse_seed(o.seed));
  rec.overlap = job.inputs.overlap;
  rec.progress = job.inputs.progressed_by_thread ? "thread" : "polling";
  rec.bucket_readiness = job.inputs.readiness_measured ? "measured" : "estimated";
  rec.scaling = job.inputs.strong ? "strong" : "weak";
  rec.measured_ranks = job.inputs.measured_ranks;
  rec.measured_step_s = job.inputs.measured_step_s;
  rec.error = *error;
  for (const Point& p : points) {
    rec.ranks.push_back(p.ranks);
    rec.step_s.push_back(p.step.step_s);
    rec.efficiency.push_back(p.efficiency);
    rec.compute_s.push_back(p.step.compute_s);
    rec.straggler_wait_s.push_back(p.step.straggler_wait_s);
    rec.exposed_allreduce_s.push_back(p.step.exposed_allreduce_s);
    rec.update_s.push_back(p.step.update_and_other_s);
    rec.parameter_gather_s.push_back(p.step.parameter_gather_s);
    rec.embedding_rows_bytes.push_back(p.embedding_rows_bytes);
  }
  for (const GradientBucket& b : job.inputs.buckets) {
    rec.bucket_bytes.push_back(b.bytes);
    rec.bucket_ready_fraction.push_back(b.ready_fraction);
  }
  return group_of(rec, kSimulationFields, kSimulationDatasets);
}

int run(const Options& o) {
  std::optional<ResultsFile> file;
  std::vector<std::string> notes;
  std::vector<Job> jobs;
  {
    // A damaged file can stop HDF5 inside one call for ever: the guard then ends the program,
    // naming the file, as bad input (suite/process/read_guard.h). The simulations come after it.
    std::optional<ReadGuard> reading;
    try {
      reading.emplace(fmt::format("dlscale-project: error: {}", o.results), read_stall_seconds());
      file.emplace(ResultsFile::open(o.results, !o.dry_run));
    } catch (const std::exception& e) {
      throw UsageError(e.what());
    }
    jobs = plan(o, *file, &notes);
  }
  for (const std::string& note : notes) std::fprintf(stderr, "%s\n", note.c_str());
  if (o.dry_run) {
    for (const Job& j : jobs) {
      std::printf("case %s (%s): platform %s, P = %s, %zu compute samples, %zu bucket%s, %s\n", j.inputs.name.c_str(),
                  j.inputs.label.c_str(), j.platform.cluster.name.c_str(),
                  fmt::format("{}", fmt::join(j.ranks, ",")).c_str(), j.inputs.samples.size(), j.inputs.buckets.size(),
                  j.inputs.buckets.size() == 1 ? "" : "s", bucket_timing(j.inputs));
    }
    return exit_code(ExitCode::kOk);
  }
  std::vector<std::pair<std::string, GroupRecord>> groups;
  for (const Job& job : jobs) {
    double error = 0;
    groups.emplace_back("cases/" + job.inputs.name + "/simulations",
                        simulation_group(job, simulate(job, o), o, &error));
    std::printf("error at the measured P = %d: simulated / measured step - 1 = %+.1f%% (measured median %.3f ms)\n",
                job.inputs.measured_ranks, error * 100, job.inputs.measured_step_s * 1e3);
  }
  ResultsFile::Update update = file->update();
  for (const auto& [parent, group] : groups) {
    const std::string name = update.append_group(parent, group);
    std::printf("written: /%s/%s\n", parent.c_str(), name.c_str());
  }
  update.commit();
  return exit_code(ExitCode::kOk);
}

}  // namespace
}  // namespace dlscale::project

int main(int argc, char** argv) {
  using dlscale::exit_code;
  using dlscale::ExitCode;
  dlscale::project::Options o;
  CLI::App app{
      "Projects the training step of a results file's cases (timing, --phases) to other rank counts by simulating "
      "a cluster with SimGrid, and writes the projection into the file (docs/projection.md).",
      "dlscale-project"};
  app.add_option("results", o.results, "results file (HDF5) written by dlscale run")->required();
  app.add_option("--platform", o.platform,
                 "a preset's name (project/platforms), a platform TOML file, a SimGrid platform file (.xml), or "
                 "measured (the case's own all-reduce figures; the default)");
  CLI::Option* ranks = app.add_option("--ranks", o.ranks,
                                      "rank counts, comma-separated (default: powers of two to 8192 within the "
                                      "platform); 1 and the measured P are always added");
  app.add_option("--case", o.cases, "cases to project (default: every usable one)")->allow_extra_args(false);
  app.add_option("--allreduce", o.allreduce,
                 "all-reduce algorithm: ring or binomial (Open MPI 4.1's non-blocking all-reduce in place); default: "
                 "the one the case ran (docs/projection.md)");
  app.add_option("--allreduce-hierarchy", o.hierarchy,
                 "flat (one ring of every rank) or host (reduced within each node, a ring of the nodes' first "
                 "ranks, broadcast back); default: the one the case ran");
  app.add_option("--model", o.model, "ring model: flow (any P) or message (P up to 256)");
  app.add_option("--steps", o.steps, "steps simulated per P (default 3)");
  app.add_option("--seed", o.seed, "seed of the compute resampling (default 1)");
  app.add_flag("--dry-run", o.dry_run, "print the cases and rank counts, then exit without simulating or writing");
  try {
    app.parse(argc, argv);
    o.ranks_given = ranks->count() > 0;
    return dlscale::project::run(o);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "dlscale-project: error: %s\n", e.what());
    return exit_code(ExitCode::kUsage);
  } catch (const dlscale::UsageError& e) {
    std::fprintf(stderr, "dlscale-project: error: %s\n", e.what());
    return exit_code(ExitCode::kUsage);
  } catch (const dlscale::WriteError& e) {
    std::fprintf(stderr, "dlscale-project: error: %s\n", e.what());
    return exit_code(ExitCode::kWriteFailed);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dlscale-project: error: %s\n", e.what());
    return exit_code(ExitCode::kCaseFailed);
  }
}
