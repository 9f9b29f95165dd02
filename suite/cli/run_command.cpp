// `dlscale run`: turn the request into cases, check everything a user can get wrong before
// any benchmark work (on every rank, agreeing on the outcome; rank 0 locks the results file
// before the data and devices are checked and before the ranks agree, so that a second writer is
// refused first), then run the cases in order, writing and flushing each as it finishes.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "io/results_file.h"
#include "suite/case/device_binding.h"
#include "suite/case/runner.h"
#include "suite/case/work_estimate.h"
#include "suite/cli/commands.h"
#include "suite/cli/lifecycle.h"
#include "suite/data/datasets.h"
#include "suite/errors.h"
#include "suite/exit_code.h"
#include "suite/matrix/builtin_suites.h"
#include "suite/meters/peak.h"
#include "suite/meters/wall_clock.h"
#include "suite/process/stop_signals.h"
#include "suite/record/mllog_reporter.h"
#include "suite/record/peak_fields.h"
#include "suite/record/provenance.h"
#include "suite/record/reporters.h"
#include "suite/record/results_access.h"

namespace dlscale {

namespace {

std::string read_text_file(const std::string& path) {
  // A regular file of sensible size only: a FIFO or /dev/zero would never finish reading.
  constexpr off_t kMaxConfigBytes = 1 << 20;
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) {
    throw UsageError(fmt::format("--config {}: cannot read it ({})", path, std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) throw UsageError(fmt::format("--config {}: not a regular file", path));
  if (st.st_size > kMaxConfigBytes) {
    throw UsageError(fmt::format("--config {}: {} bytes, more than a run matrix needs (at most {})", path,
                                 static_cast<int64_t>(st.st_size), static_cast<int64_t>(kMaxConfigBytes)));
  }
  std::ifstream f(path);
  if (!f) throw UsageError(fmt::format("--config {}: cannot read it ({})", path, std::strerror(errno)));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// Where default_out() puts results files; open_results() makes it when missing.
constexpr const char* default_dir = "results";

bool is_directory(const char* path) {
  struct stat st {};
  return ::stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

std::string stem(const std::string& path) {
  std::string name = path.substr(path.rfind('/') + 1);
  return name.substr(0, name.rfind('.'));
}

/// Where results go when --out is not given: results/<suite>.h5, results/<config>.h5, or a
/// timestamped name for a run built from flags.
std::string default_out(const RunArgs& args, const std::string& suite) {
  const std::string dir = default_dir;
  if (args.config) return dir + "/" + stem(*args.config) + ".h5";
  if (!suite.empty()) return dir + "/" + suite + ".h5";
  std::string stamp = utc_now();
  stamp.erase(std::remove(stamp.begin(), stamp.end(), ':'), stamp.end());
  stamp.erase(std::remove(stamp.begin(), stamp.end(), '-'), stamp.end());
  return dir + "/run-" + stamp + ".h5";
}

/// The command line that continues an interrupted run: as typed, without --overwrite or
/// --resume (added by the caller) and with the file named.
std::string resume_command(const std::string& command_line, const std::string& out_path) {
  std::string out;
  std::istringstream words(command_line);
  bool has_out = false;
  for (std::string w; words >> w;) {
    if (w == "--overwrite" || w == "--resume") continue;
    has_out |= w == "--out" || w.rfind("--out=", 0) == 0;
    out += (out.empty() ? "" : " ") + w;
  }
  return has_out ? out : out + " --out " + out_path;
}

/// What `dlscale run` resolved from its request before anything runs.
struct RunPlan {
  std::vector<ResolvedCase> cases;
  std::string out_path;
  std::optional<ResultsFile> file;  ///< rank 0's, locked (not with --dry-run)
  std::vector<char> skip;           ///< 1: --resume found the case done
  std::vector<PeakRow> peak_rows;   ///< --peak FILE's, on rank 0
  std::string peak_where;
  bool made_default_dir = false;
};

/// The run matrices the request names: --config, --suite (the study when nothing is named), or
/// the flags alone; the flags given override every matrix.
std::vector<MatrixSpec> requested_matrices(const RunArgs& args, std::string& suite_name) {
  std::vector<MatrixSpec> matrices;
  if (args.config) {
    matrices = parse_matrix_toml(read_text_file(*args.config), *args.config);
  } else if (args.suite || !args.overrides.has("workload")) {
    suite_name = args.suite.value_or("study");
    matrices = parse_matrix_toml(find_suite(suite_name).toml, "suite " + suite_name);
  } else {
    matrices = {MatrixSpec{}};
  }
  for (MatrixSpec& m : matrices) args.overrides.apply(m);
  return matrices;
}

/// A suite whose cases need more ranks than the job has, where the user chose no rank counts
/// (`dlscale run` alone, the study, started as one process): the one line says how to launch it,
/// rather than blaming a --ranks the user never typed. `--bind-to none`: Open MPI binds each rank
/// to one core by default, and a case of several threads per rank would time them on that core.
void check_suite_fits(const std::vector<CaseSpec>& specs, const std::string& suite_name, const RunArgs& args,
                      int world_size) {
  if (suite_name.empty() || args.overrides.has("ranks") || specs.empty()) return;
  const int most = std::max_element(specs.begin(), specs.end(), [](const CaseSpec& a, const CaseSpec& b) {
                     return a.ranks < b.ranks;
                   })->ranks;
  if (most <= world_size) return;
  throw UsageError(
      fmt::format("the {} suite runs cases on up to {} ranks and this job has {}: run it as "
                  "`mpirun -np {} --bind-to none {}`",
                  suite_name, most, world_size, most, args.command_line));
}

}  // namespace

std::vector<CaseSpec> requested_cases(const RunArgs& args, const Registry& drivers, int world_size,
                                      std::string& suite_name) {
  std::vector<CaseSpec> specs = expand(requested_matrices(args, suite_name), world_size);
  check_suite_fits(specs, suite_name, args, world_size);
  assign_defaults(specs, drivers);
  validate_request(specs, drivers, world_size);
  return specs;
}

namespace {

/// Resolves the request into cases and checks everything a user can get wrong (throws
/// UsageError). Rank 0 takes the results file's lock (and checks what --resume continues) before
/// anything that can wait or take long (data, devices, other ranks), so that a second writer is
/// refused at once; nothing is written before the first commit.
void plan_run(const MpiContext& mpi, const RunArgs& args, const Registry& drivers, RunPlan& plan) {
  std::string suite_name;
  const std::vector<CaseSpec> specs = requested_cases(args, drivers, mpi.size(), suite_name);
  plan.cases = resolve_cases(specs, drivers, mpi.default_threads(), mpi.hosts());
  plan.out_path = args.out.value_or(default_out(args, suite_name));
  plan.skip.assign(specs.size(), 0);
  if (!(args.peak_seconds > 0 && std::isfinite(args.peak_seconds))) {
    throw UsageError(fmt::format("--peak-seconds must be a positive number, got {}", args.peak_seconds));
  }
  const bool root = mpi.rank() == 0;
  if (args.peak != "measure" && args.peak != "skip") {
    if (args.peak.empty()) throw UsageError("--peak: an empty path");
    if (root) plan.peak_rows = read_peak_file(args.peak, &plan.peak_where);
  }
  if (root && !args.dry_run) {
    plan.made_default_dir = !args.out && !is_directory(default_dir);
    plan.file.emplace(open_results(plan.out_path, args.overwrite, args.resume, !args.out.has_value(), mpi.size()));
    if (args.resume) {
      // A case is done when the file holds it with status ok; anything else runs again.
      const std::set<std::string> done = finished_case_keys(*plan.file);
      for (size_t i = 0; i < specs.size(); ++i) plan.skip[i] = done.count(plan.cases[i].key) ? 1 : 0;
    }
  }
  // Reads the data sets (and asks the drivers about devices): after the lock.
  check_devices_and_data(plan.cases, !args.dry_run);
}

/// --dry-run: the cases a real run would record, each with its pasteable command and estimated
/// duration, then the total; nothing is run or written. Rank 0 measures and prints.
ExitCode dry_run(const MpiContext& mpi, const RunArgs& args, const RunPlan& plan) {
  if (mpi.rank() == 0) {
    std::vector<std::string> notes;
    const std::vector<CaseEstimate> est = estimate_cases(plan.cases, args.assume_gflops, DatasetSizes(), &notes);
    fmt::print("dlscale: dry run: {} case(s) on {} rank(s) -> {} (not created)\n", plan.cases.size(), mpi.size(),
               plan.out_path);
    double total = 0;
    bool unknown = false;
    for (size_t i = 0; i < plan.cases.size(); ++i) {
      const std::string when = est[i].seconds >= 0 ? fmt::format("about {:.3g} s", est[i].seconds) : "no estimate";
      fmt::print("{:04} {}   # {}\n", i, plan.cases[i].key, when);
      if (est[i].seconds >= 0) total += est[i].seconds;
      unknown |= est[i].seconds < 0;
    }
    for (const std::string& n : notes) fmt::print("dlscale: rate: {}\n", n);
    fmt::print(
        "dlscale: estimated {:.3g} s of training steps{} ({}); set-up, data loading and waiting for "
        "other ranks come on top\n",
        total, unknown ? " for the cases with an estimate" : "",
        args.assume_gflops > 0 ? fmt::format("at {} GFLOP/s per rank, as given", args.assume_gflops)
                               : std::string("at the rates measured on rank 0"));
    std::fflush(stdout);
  }
  sleeping_barrier(mpi.world(), 2000);  // a spinning one would take the cores rank 0 probes on
  return ExitCode::kOk;
}

/// Cases that ask for more threads per rank than a rank's CPU set holds: their threads would share
/// its cores, and the case would time that. Plain `mpirun -np N` binds each rank to one core.
std::vector<std::string> thread_warnings(const std::vector<ResolvedCase>& cases, const std::vector<RankInfo>& table) {
  std::map<int, std::pair<std::set<size_t>, std::set<int>>> over;  // threads -> (cases, ranks short of CPUs)
  for (size_t i = 0; i < cases.size(); ++i) {
    const ResolvedCase& c = cases[i];
    if (c.gpu() || c.spec.threads <= 0) continue;
    for (const int world : c.placed.world) {
      const auto rank = std::find_if(table.begin(), table.end(), [&](const RankInfo& r) { return r.rank == world; });
      if (rank != table.end() && rank->threads > 0 && c.spec.threads > rank->threads) {
        over[c.spec.threads].first.insert(i);
        over[c.spec.threads].second.insert(world);
      }
    }
  }
  std::vector<std::string> warnings;
  const auto join = [](const auto& items, const char* format) {
    std::string out;
    for (const auto& item : items) out += (out.empty() ? "" : ", ") + fmt::format(fmt::runtime(format), item);
    return out;
  };
  for (const auto& [threads, where] : over) {
    warnings.push_back(fmt::format(
        "case{} {} ask{} for {} threads per rank, but the CPU set of rank{} {} is smaller: the threads share its "
        "cores (mpirun binds each rank to one core unless launched with --bind-to none)",
        where.first.size() == 1 ? "" : "s", join(where.first, "{:04}"), where.first.size() == 1 ? "s" : "", threads,
        where.second.size() == 1 ? "" : "s", join(where.second, "{}")));
  }
  return warnings;
}

/// The rank table, with each rank's GPU where the run has GPU cases (asking the drivers about
/// GPUs initialises CUDA on every rank, so only then), and rank 0's warnings about it.
std::vector<RankInfo> rank_table_of_run(const MpiContext& mpi, const RunPlan& plan, const Registry& drivers,
                                        Progress& progress) {
  RankInfo mine = mpi.info();
  if (std::any_of(plan.cases.begin(), plan.cases.end(), [](const ResolvedCase& c) { return c.gpu(); })) {
    if (const int gpus = visible_gpus(drivers); gpus > 0) {
      mine.device = describe_gpu(drivers, gpu_index_for(mpi.local_rank(), gpus));
    }
  }
  std::vector<RankInfo> table = gather_rank_table(mpi.world(), mine);
  if (mpi.rank() == 0) {
    for (const std::string& w : provenance_warnings(detect_loaded_math())) progress.warn(w);
    for (const std::string& w : shared_core_warnings(table)) progress.warn(w);
    for (const std::string& w : shared_gpu_warnings(table)) progress.warn(w);
    for (const std::string& w : thread_warnings(plan.cases, table)) progress.warn(w);
  }
  return table;
}

/// The peaks every case is compared with, outside any case: measured now on every rank (and
/// recorded in the file as /peak/NNNN), read from a --peak file, or skipped. nullopt: the
/// measurement could not be written.
std::optional<PeakLookup> peaks_for_run(const MpiContext& mpi, const RunArgs& args, RunPlan& plan,
                                        const Registry& drivers, int64_t run_number, StopDeadline& deadline,
                                        const std::string& resume_hint) {
  // A resume with every case done measures nothing.
  const bool measure = args.peak == "measure" && std::find(plan.skip.begin(), plan.skip.end(), 0) != plan.skip.end();
  if (!measure) {
    if (args.peak != "skip" && mpi.rank() == 0) return PeakLookup(std::move(plan.peak_rows), plan.peak_where);
    return PeakLookup({}, "", "--peak skip: no peak was measured or given");
  }
  std::set<PeakKey> unique;
  std::vector<PeakKey> keys;
  bool gpu_cases = false;
  for (size_t i = 0; i < plan.cases.size(); ++i) {
    if (plan.skip[i]) continue;
    const ResolvedCase& c = plan.cases[i];
    const PeakKey key{c.spec.driver, c.spec.device, c.spec.precision, c.threads};
    if (unique.insert(key).second) keys.push_back(key);
    gpu_cases = gpu_cases || c.gpu();
  }
  const int gpu = gpu_cases ? gpu_index_for(mpi.local_rank(), visible_gpus(drivers)) : 0;
  const auto started = std::chrono::steady_clock::now();
  std::vector<PeakRow> rows = measure_peaks(mpi.world(), keys, drivers, args.peak_seconds, gpu);
  std::string name;
  const bool written = written_by_rank0(mpi.world(), plan.out_path, resume_hint, [&] {
    const auto writing = deadline.hold_off();
    ResultsFile::Update update = plan.file->update();
    name = update.append_group("peak", peak_group(rows, "measured by this run", args.peak_seconds, run_number));
    update.commit();
  });
  if (!written) return std::nullopt;
  if (mpi.rank() != 0) return PeakLookup({}, "", "--peak skip: no peak was measured or given");
  fmt::print(stderr, "dlscale: peak: {} measurement(s) per rank in {:.1f} s -> /peak/{} (--peak skip omits them)\n",
             rows.size() / static_cast<size_t>(mpi.size()),
             std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), name);
  return PeakLookup(std::move(rows), fmt::format("/peak/{} of this file", name));
}

/// This run's record, /runs/NNNN (and for a new file its provenance), committed by rank 0;
/// its number, or nullopt when it could not be written (every rank).
std::optional<int64_t> write_run_record(const MpiContext& mpi, const RunArgs& args, RunPlan& plan,
                                        const Registry& drivers, const std::vector<RankInfo>& table,
                                        StopDeadline& deadline, const std::string& resume_hint) {
  std::vector<CaseSpec> specs;
  for (const ResolvedCase& c : plan.cases) specs.push_back(c.spec);
  int64_t run_number = 0;  // rank 0's: the /runs record this run's cases name
  const bool written = written_by_rank0(mpi.world(), plan.out_path, resume_hint, [&] {
    const auto writing = deadline.hold_off();
    ResultsFile::Update update = plan.file->update();
    run_number =
        write_provenance(update, table, drivers, mpi.size(), args.command_line, cases_to_toml(specs), args.resume);
    update.commit();
  });
  return written ? std::optional<int64_t>(run_number) : std::nullopt;
}

/// A run stopped by a signal: rank 0 says where the `done` finished cases are and how to run
/// the rest.
ExitCode stopped(const MpiContext& mpi, const RunPlan& plan, size_t done, const std::string& resume_hint) {
  const int signal = allreduce_max(mpi.world(), stop_signal());
  if (mpi.rank() == 0) {
    fmt::print(stderr,
               "dlscale: stopped by {} after {} finished case(s); they are in {}. To run the rest, under the "
               "same launcher:\n"
               "  {}\n",
               stop_signal_name(signal), done, plan.out_path, resume_hint);
  }
  return ExitCode::kStopped;
}

/// How the case loop ended.
enum class LoopEnd { kDone, kStopped, kWriteFailed };

/// Runs the cases in order, handing each finished one to the reporters (rank 0); a stop signal
/// between or inside cases ends the loop on every rank, the unfinished case unwritten.
LoopEnd run_cases(const MpiContext& mpi, RunPlan& plan, Runner& runner, ResultsFileReporter* file,
                  const std::vector<Reporter*>& reporters, Tally& tally, StopDeadline& deadline, int64_t run_number,
                  const std::string& allocator, const std::string& resume_hint, std::FILE* text_out, size_t& done) {
  const bool root = mpi.rank() == 0;
  for (size_t i = 0; i < plan.cases.size(); ++i) {
    // Named before the agreement that starts the case: a rank lost after the last commit blocks
    // that agreement, and a stop signal's line must then name this case, not the one in the file.
    if (!plan.skip[i]) deadline.set_doing(fmt::format("case {}", plan.cases[i].key));
    // A stop signal between cases (or on a rank outside the last case) stops here, on every rank.
    if (allreduce_max(mpi.world(), stop_signal()) != 0) return LoopEnd::kStopped;
    if (plan.skip[i]) {
      if (root) fmt::print(text_out, "# skipped (already in {}): {}\n", plan.out_path, plan.cases[i].key);
      tally.skipped();
      continue;
    }
    CaseResult result = runner.run(plan.cases[i], static_cast<int>(i), static_cast<int>(plan.cases.size()));
    if (allreduce_max(mpi.world(), result.interrupted ? 1 : 0) != 0) return LoopEnd::kStopped;
    result.allocator = allocator;
    result.run = run_number;
    if (root) result.group = file->next_group();
    // The file first: a case printed is a case recorded.
    if (!written_by_rank0(mpi.world(), plan.out_path, resume_hint, [&] { file->case_finished(result); }))
      return LoopEnd::kWriteFailed;
    ++done;
    if (root) {
      for (Reporter* r : reporters) r->case_finished(result);
    }
  }
  return LoopEnd::kDone;
}

/// `plan()` on every rank; where it refused the request, on any rank, the request is rejected with
/// one line and leaves nothing behind, not even the default folder it made for its file; true
/// when it was refused.
bool refused(const MpiContext& mpi, RunPlan& plan, const std::function<void()>& plan_it) {
  if (!usage_refused(mpi.world(), plan_it)) return false;
  if (plan.made_default_dir) {
    plan.file.reset();
    ::rmdir(default_dir);
  }
  return true;
}

}  // namespace

int run_command(const MpiContext& mpi, const RunArgs& args) {
  // From here a stop signal that the ranks cannot act on together ends each rank on its own.
  StopDeadline deadline(mpi.rank(), mpi.host());
  Registry drivers;
  register_drivers(drivers);
  const bool root = mpi.rank() == 0;
  RunPlan plan;
  if (refused(mpi, plan, [&] { plan_run(mpi, args, drivers, plan); })) return exit_code(ExitCode::kUsage);
  if (args.dry_run) return exit_code(dry_run(mpi, args, plan));
  DLSCALE_CHECK_MPI(MPI_Bcast(plan.skip.data(), static_cast<int>(plan.skip.size()), MPI_CHAR, 0, mpi.world()));

  // With --format json stdout carries the case objects only; everything else goes to stderr.
  std::FILE* const text_out = args.format == OutputFormat::kJson ? stderr : stdout;
  Progress progress(root, args.progress, text_out);
  const std::vector<RankInfo> table = rank_table_of_run(mpi, plan, drivers, progress);
  const std::string resume_hint = fmt::format("{} --resume", resume_command(args.command_line, plan.out_path));
  const std::string where_and_how = fmt::format(
      "Every finished case is in {}; to run the rest, under the same launcher: {}", plan.out_path, resume_hint);
  deadline.set_hint(where_and_how);
  const std::optional<int64_t> run_number = write_run_record(mpi, args, plan, drivers, table, deadline, resume_hint);
  if (!run_number) return exit_code(ExitCode::kWriteFailed);
  if (root)
    fmt::print(text_out, "dlscale: {} case(s) on {} rank(s) -> {}\n", plan.cases.size(), mpi.size(), plan.out_path);
  // Before the peaks and every case, on every rank: each case is measured under it.
  apply_malloc_policy(args.malloc);
  std::optional<PeakLookup> peaks = peaks_for_run(mpi, args, plan, drivers, *run_number, deadline, resume_hint);
  if (!peaks) return exit_code(ExitCode::kWriteFailed);

  std::vector<double> work;
  DatasetSizes set_sizes;
  for (size_t i = 0; i < plan.cases.size(); ++i) {
    work.push_back(plan.skip[i] ? 0.0 : training_flops_per_rank(plan.cases[i], std::ref(set_sizes)));
  }
  progress.run_started(std::move(work));
  Runner runner(mpi, progress, where_and_how, std::move(*peaks));
  std::optional<ResultsFileReporter> file;
  if (root) file.emplace(*plan.file, deadline);
  ProgressReporter progress_display(progress);
  CaseLineReporter lines(args.format, stdout);
  std::optional<MllogReporter> mllog;
  if (root && args.mllog_dir) mllog.emplace(*args.mllog_dir, std::filesystem::path(plan.out_path).stem().string());
  std::vector<Reporter*> reporters = {&progress_display, &lines};
  if (mllog) reporters.push_back(&*mllog);
  Tally tally;
  reporters.push_back(&tally);
  size_t done = 0;
  const LoopEnd end = run_cases(mpi, plan, runner, file ? &*file : nullptr, reporters, tally, deadline, *run_number,
                                describe_allocator(args.malloc), resume_hint, text_out, done);
  deadline.set_doing("the end of the run");
  if (end == LoopEnd::kWriteFailed) return exit_code(ExitCode::kWriteFailed);
  if (root) fmt::print(text_out, "{}\n", tally.line());
  if (end == LoopEnd::kStopped) return exit_code(stopped(mpi, plan, done, resume_hint));
  if (root) fmt::print(text_out, "dlscale: results in {}\n", plan.out_path);
  return exit_code(allreduce_max(mpi.world(), tally.any_error() ? 1 : 0) != 0 ? ExitCode::kCaseFailed : ExitCode::kOk);
}

}  // namespace dlscale
