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
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "io/results_file.h"
#include "suite/matrix/builtin_suites.h"
#include "suite/cli/commands.h"
#include "suite/data/datasets.h"
#include "suite/case/device_binding.h"
#include "suite/errors.h"
#include "suite/meters/peak.h"
#include "suite/record/provenance.h"
#include "suite/record/results_access.h"
#include "suite/case/runner.h"
#include "suite/process/stop_signals.h"

namespace dlscale {

bool report_usage_error(MPI_Comm comm, const std::string& message) {
  int rank = 0, size = 1;
  DLSCALE_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  DLSCALE_CHECK_MPI(MPI_Comm_size(comm, &size));
  const int mine = message.empty() ? size : rank;
  int first = size;
  DLSCALE_CHECK_MPI(MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm));
  if (first == size) return false;
  if (rank == first) {
    fmt::print(stderr, "dlscale: error: {}\n", message);
    std::fflush(stderr);
  }
  return true;
}

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

}  // namespace

bool write_failed(MPI_Comm comm, const std::string& error, const std::string& path, const std::string& resume_hint) {
  int rank = 0;
  DLSCALE_CHECK_MPI(MPI_Comm_rank(comm, &rank));
  if (allreduce_max(comm, error.empty() ? 0 : 1) == 0) return false;
  if (!error.empty()) {
    fmt::print(stderr,
               "dlscale: error: the results file could not be written ({}); {} is as it was before, with every case "
               "finished before. Make room (or repair the file system), then, under the same launcher: {}\n",
               error, path, resume_hint);
    std::fflush(stderr);
  }
  return true;
}

namespace {

/// --dry-run: the cases a real run would record, each with its pasteable command and estimated
/// duration, then the total; nothing is run or written. Rank 0 measures and prints.
int dry_run(const MpiContext& mpi, const RunArgs& args, const std::vector<CaseSpec>& cases, const Registry& drivers,
            const std::string& out_path) {
  if (mpi.rank() == 0) {
    std::vector<std::string> notes;
    const std::vector<CaseEstimate> est =
        estimate_cases(cases, drivers, mpi.default_threads(), args.assume_gflops, DatasetSizes(), &notes);
    fmt::print("dlscale: dry run: {} case(s) on {} rank(s) -> {} (not created)\n", cases.size(), mpi.size(), out_path);
    double total = 0;
    bool unknown = false;
    for (size_t i = 0; i < cases.size(); ++i) {
      const std::string when = est[i].seconds >= 0 ? fmt::format("about {:.3g} s", est[i].seconds) : "no estimate";
      fmt::print("{:04} {}   # {}\n", i, cases[i].command(), when);
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
  // The others wait asleep: a spinning barrier would take the cores the probe is timed on.
  MPI_Request barrier = MPI_REQUEST_NULL;
  DLSCALE_CHECK_MPI(MPI_Ibarrier(mpi.world(), &barrier));
  for (int done = 0; !done;) {
    DLSCALE_CHECK_MPI(MPI_Test(&barrier, &done, MPI_STATUS_IGNORE));
    if (!done) usleep(2000);
  }
  return 0;
}

}  // namespace

int run_command(const MpiContext& mpi, const RunArgs& args) {
  // From here a stop signal that the ranks cannot act on together ends each rank on its own.
  StopDeadline deadline(mpi.rank(), mpi.host());
  Registry drivers;
  register_drivers(drivers);
  const bool root = mpi.rank() == 0;
  const bool workloads_given = std::any_of(args.overrides.given.begin(), args.overrides.given.end(),
                                           [](const Axis* a) { return std::string(a->name) == "workload"; });
  const bool nothing_given = !args.config && !args.suite && !workloads_given;

  std::vector<CaseSpec> cases;
  std::string suite_name, out_path;
  std::optional<ResultsFile> file;
  std::vector<char> skip;
  std::vector<PeakRow> peak_rows;
  std::string peak_where;
  std::string problem;
  bool made_default_dir = false;
  try {
    std::vector<MatrixSpec> matrices;
    if (args.config) {
      matrices = parse_matrix_toml(read_text_file(*args.config), *args.config);
    } else if (args.suite || nothing_given) {
      suite_name = args.suite.value_or("study");
      matrices = parse_matrix_toml(find_suite(suite_name).toml, "suite " + suite_name);
    } else {
      matrices = {MatrixSpec{}};
    }
    for (MatrixSpec& m : matrices) args.overrides.apply(m);
    cases = expand(matrices, mpi.size());
    assign_defaults(cases, drivers);
    validate_request(cases, drivers, mpi.size());
    out_path = args.out.value_or(default_out(args, suite_name));
    skip.assign(cases.size(), 0);
    if (!(args.peak_seconds > 0 && std::isfinite(args.peak_seconds))) {
      throw UsageError(fmt::format("--peak-seconds must be a positive number, got {}", args.peak_seconds));
    }
    if (args.peak != "measure" && args.peak != "skip") {
      if (args.peak.empty()) throw UsageError("--peak: an empty path");
      if (root) peak_rows = read_peak_file(args.peak, &peak_where);
    }
    // Rank 0 takes the results file's lock (and checks what --resume continues) before the
    // ranks agree and before anything that can wait or take long (peaks, data, other ranks), so
    // that a second writer is refused at once. Nothing is written before the first commit,
    // after this agreement: a problem only another rank sees (an unreadable --config, say)
    // leaves an existing file as it was.
    if (root && !args.dry_run) {
      made_default_dir = !args.out && !is_directory(default_dir);
      file.emplace(open_results(out_path, args.overwrite, args.resume, !args.out.has_value(), mpi.size()));
      if (args.resume) {
        // A case is done when the file holds it with status ok; anything else runs again.
        const std::set<std::string> done = finished_case_keys(*file);
        for (size_t i = 0; i < cases.size(); ++i) skip[i] = done.count(cases[i].command()) ? 1 : 0;
      }
    }
    // Reads the data sets (and asks the drivers about devices): after the lock.
    check_devices_and_data(cases, drivers, !args.dry_run);
  } catch (const UsageError& e) {
    problem = e.what();
  }
  if (report_usage_error(mpi.world(), problem)) {
    // A refused run leaves nothing behind: not even the default folder it made for its file.
    if (made_default_dir) {
      file.reset();
      ::rmdir(default_dir);
    }
    return 2;
  }
  if (args.dry_run) return dry_run(mpi, args, cases, drivers, out_path);
  DLSCALE_CHECK_MPI(MPI_Bcast(skip.data(), static_cast<int>(skip.size()), MPI_CHAR, 0, mpi.world()));

  const bool json = args.format == OutputFormat::kJson;
  // With --format json stdout carries the case objects only; everything else goes to stderr.
  std::FILE* const text_out = json ? stderr : stdout;
  Progress progress(root, args.progress, text_out);
  RankInfo mine = mpi.info();
  // Only runs with GPU cases ask the drivers about GPUs (that initialises CUDA on every rank).
  if (std::any_of(cases.begin(), cases.end(), [](const CaseSpec& c) { return c.device == DeviceType::kCuda; })) {
    if (const int gpus = visible_gpus(drivers); gpus > 0) {
      mine.device = describe_gpu(drivers, gpu_index_for(mpi.local_rank(), gpus));
    }
  }
  const std::vector<RankInfo> table = gather_rank_table(mpi.world(), mine);
  if (root) {
    for (const std::string& w : provenance_warnings(detect_loaded_math())) progress.warn(w);
    for (const std::string& w : shared_core_warnings(table)) progress.warn(w);
    for (const std::string& w : shared_gpu_warnings(table)) progress.warn(w);
  }
  const std::string resume_hint = fmt::format("{} --resume", resume_command(args.command_line, out_path));
  deadline.set_hint(
      fmt::format("Every finished case is in {}; to run the rest, under the same launcher: {}", out_path, resume_hint));
  int64_t run_number = 0;  // rank 0's: the /runs record this run's cases name
  {
    std::string error;
    if (root) {
      const auto writing = deadline.hold_off();
      try {
        ResultsFile::Update update = file->update();
        run_number =
            write_provenance(update, table, drivers, mpi.size(), args.command_line, cases_to_toml(cases), args.resume);
        update.commit();
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    if (write_failed(mpi.world(), error, out_path, resume_hint)) return 5;
  }
  if (root) fmt::print(text_out, "dlscale: {} case(s) on {} rank(s) -> {}\n", cases.size(), mpi.size(), out_path);
  // Before the peaks and every case, on every rank: each case is measured under it.
  apply_malloc_policy(args.malloc);
  const std::string allocator = describe_allocator(args.malloc);

  // The peaks every case is compared with, outside any case: measured now on every rank (and
  // recorded in the file), read from a file, or skipped.
  PeakLookup peaks({}, "", "--peak skip: no peak was measured or given");
  // A resume with every case done measures nothing.
  if (args.peak == "measure" && std::find(skip.begin(), skip.end(), 0) != skip.end()) {
    std::set<PeakKey> unique;
    std::vector<PeakKey> keys;
    bool gpu_cases = false;
    for (size_t i = 0; i < cases.size(); ++i) {
      if (skip[i]) continue;
      const CaseSpec& c = cases[i];
      const PeakKey key{c.driver, c.device, c.precision, c.threads > 0 ? c.threads : mpi.default_threads()};
      if (unique.insert(key).second) keys.push_back(key);
      gpu_cases = gpu_cases || c.device == DeviceType::kCuda;
    }
    const int gpu = gpu_cases ? gpu_index_for(mpi.local_rank(), visible_gpus(drivers)) : 0;
    const auto started = std::chrono::steady_clock::now();
    std::vector<PeakRow> rows = measure_peaks(mpi.world(), keys, drivers, args.peak_seconds, gpu);
    std::string name, error;
    if (root) {
      const auto writing = deadline.hold_off();
      try {
        ResultsFile::Update update = file->update();
        GroupRecord group = peak_group(rows, "measured by this run", args.peak_seconds);
        group.attrs.emplace_back("run", run_number);
        name = update.append_group("peak", group);
        update.commit();
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    if (write_failed(mpi.world(), error, out_path, resume_hint)) return 5;
    if (root) {
      fmt::print(stderr, "dlscale: peak: {} measurement(s) per rank in {:.1f} s -> /peak/{} (--peak skip omits them)\n",
                 rows.size() / static_cast<size_t>(mpi.size()),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(), name);
      peaks = PeakLookup(std::move(rows), fmt::format("/peak/{} of this file", name));
    }
  } else if (args.peak != "skip" && root) {
    peaks = PeakLookup(std::move(peak_rows), peak_where);
  }

  std::vector<double> work;
  DatasetSizes set_sizes;
  for (size_t i = 0; i < cases.size(); ++i) {
    work.push_back(skip[i] ? 0.0 : training_flops_per_rank(cases[i], std::ref(set_sizes)));
  }
  progress.run_started(std::move(work));
  Runner runner(
      mpi, drivers, progress,
      fmt::format("Every finished case is in {}; to run the rest, under the same launcher: {}", out_path, resume_hint),
      std::move(peaks));
  int failed = 0;
  size_t done = 0;
  bool stopped = false;
  for (size_t i = 0; i < cases.size() && !stopped; ++i) {
    // A stop signal between cases (or on a rank outside the last case) stops here, on every rank.
    if (allreduce_max(mpi.world(), stop_signal()) != 0) {
      stopped = true;
      break;
    }
    if (skip[i]) {
      if (root) fmt::print(text_out, "# skipped (already in {}): {}\n", out_path, cases[i].command());
      continue;
    }
    deadline.set_doing(fmt::format("case {}", cases[i].command()));
    const CaseOutcome outcome = runner.run(cases[i], static_cast<int>(i), static_cast<int>(cases.size()));
    if (allreduce_max(mpi.world(), outcome.interrupted ? 1 : 0) != 0) {
      stopped = true;  // the unfinished case is not written: a resume runs it again
      break;
    }
    CaseRecord rec = outcome.record;
    rec.attrs.emplace_back("allocator", allocator);
    rec.attrs.emplace_back("run", run_number);
    // The case, its microbenchmark and its projection replace the file together: a kill leaves
    // either all of them or none (and a resume runs the case again).
    std::string name, error;
    if (root) {
      const auto writing = deadline.hold_off();
      try {
        ResultsFile::Update update = file->update();
        name = update.write_case(rec);
        if (outcome.allreduce) {
          GroupRecord allreduce = *outcome.allreduce;
          for (auto& [key, value] : allreduce.attrs) {
            if (key == "case") value = name;
          }
          allreduce.attrs.emplace_back("run", run_number);
          update.append_group("allreduce", allreduce);
        }
        if (outcome.projection) update.write_group("cases/" + name + "/projection", *outcome.projection);
        if (outcome.utilisation) update.write_group("cases/" + name + "/utilisation", *outcome.utilisation);
        update.commit();
      } catch (const std::exception& e) {
        error = e.what();
      }
    }
    if (write_failed(mpi.world(), error, out_path, resume_hint)) return 5;
    ++done;
    if (root) {
      if (json) {
        progress.case_finished(case_json(name, rec), stdout);
      } else {
        progress.case_finished(fmt::format("{} {}", name, summary_line(rec)), stdout);
      }
      if (std::get<std::string>(attr(rec.attrs, "status")) == "error") failed = 1;
    }
  }
  deadline.set_doing("the end of the run");
  if (stopped) {
    const int signal = allreduce_max(mpi.world(), stop_signal());
    if (root) {
      fmt::print(stderr,
                 "dlscale: stopped by {} after {} finished case(s); they are in {}. To run the rest, under the "
                 "same launcher:\n"
                 "  {}\n",
                 stop_signal_name(signal), done, out_path, resume_hint);
    }
    return 3;
  }
  if (root) fmt::print(text_out, "dlscale: results in {}\n", out_path);
  return allreduce_max(mpi.world(), failed);
}

}  // namespace dlscale
