// `dlscale run`: turn the request into cases, check everything a user can get wrong before
// any benchmark work (on every rank, agreeing on the outcome), open the results file on rank 0,
// then run the cases in order, writing and flushing each as it finishes.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "io/results_file.h"
#include "suite/builtin_suites.h"
#include "suite/commands.h"
#include "suite/errors.h"
#include "suite/provenance.h"
#include "suite/runner.h"

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
  std::ifstream f(path);
  if (!f) throw UsageError(fmt::format("--config {}: cannot read it ({})", path, std::strerror(errno)));
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string stem(const std::string& path) {
  std::string name = path.substr(path.rfind('/') + 1);
  return name.substr(0, name.rfind('.'));
}

std::string parent_dir(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

bool is_dir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

/// Where results go when --out is not given: results/<suite>.h5, results/<config>.h5, or a
/// timestamped name for a run built from flags.
std::string default_out(const RunArgs& args, const std::string& suite) {
  if (args.config) return "results/" + stem(*args.config) + ".h5";
  if (!suite.empty()) return "results/" + suite + ".h5";
  std::string stamp = utc_now();
  stamp.erase(std::remove(stamp.begin(), stamp.end(), ':'), stamp.end());
  stamp.erase(std::remove(stamp.begin(), stamp.end(), '-'), stamp.end());
  return "results/run-" + stamp + ".h5";
}

/// Opens the results file on rank 0 after checking the path; throws UsageError for a path that
/// cannot be written or an existing file without --overwrite/--resume.
ResultsFile open_results(const std::string& path, const RunArgs& args, bool default_path, int world_size) {
  if (args.overwrite && args.resume) throw UsageError("--overwrite and --resume exclude each other");
  const std::string dir = parent_dir(path);
  if (default_path && !is_dir(dir) && ::mkdir(dir.c_str(), 0777) != 0) {
    throw UsageError(fmt::format("cannot create directory {} for the results: {}", dir, std::strerror(errno)));
  }
  if (!is_dir(dir)) throw UsageError(fmt::format("--out {}: directory {} does not exist", path, dir));
  if (::access(dir.c_str(), W_OK) != 0)
    throw UsageError(fmt::format("--out {}: directory {} is not writable", path, dir));
  const bool exists = ::access(path.c_str(), F_OK) == 0;
  if (exists && is_dir(path)) throw UsageError(fmt::format("--out {}: is a directory", path));
  if (exists && ::access(path.c_str(), W_OK) != 0)
    throw UsageError(fmt::format("--out {}: file is not writable", path));
  if (args.resume) {
    if (!exists) throw UsageError(fmt::format("--resume: {} does not exist", path));
    try {
      ResultsFile f = ResultsFile::open(path, true);
      const int64_t old_size = std::get<int64_t>(attr(f.read_root(), "world_size"));
      if (old_size != world_size) {
        throw UsageError(
            fmt::format("--resume: {} was written by {} ranks, this job has {}", path, old_size, world_size));
      }
      return f;
    } catch (const h5::H5Error& e) {
      throw UsageError(fmt::format("--resume: {}", e.what()));
    }
  }
  if (exists && !args.overwrite) {
    throw UsageError(
        fmt::format("{} already exists: pass --overwrite to replace it or --resume to add missing cases", path));
  }
  try {
    return ResultsFile::create(path, args.overwrite);
  } catch (const h5::H5Error& e) {
    throw UsageError(fmt::format("--out {}: {}", path, e.what()));
  }
}

Table rank_table(const std::vector<RankInfo>& rows) {
  Column rank = Column::of_ints("rank", {}), host = Column::of_strings("host", {}),
         local = Column::of_ints("local_rank", {}), cpus = Column::of_strings("cpu_affinity", {}),
         numa = Column::of_ints("numa_node", {}), device = Column::of_strings("device", {}),
         threads = Column::of_ints("threads", {});
  for (const RankInfo& r : rows) {
    rank.ints.push_back(r.rank);
    host.strings.push_back(r.host);
    local.ints.push_back(r.local_rank);
    cpus.strings.push_back(r.cpu_affinity);
    numa.ints.push_back(r.numa_node);
    device.strings.push_back(r.device);
    threads.ints.push_back(r.threads);
  }
  return {{rank, host, local, cpus, numa, device, threads}};
}

}  // namespace

int run_command(const MpiContext& mpi, const RunArgs& args) {
  Registry drivers;
  register_drivers(drivers);
  const bool root = mpi.rank() == 0;
  const bool nothing_given = !args.config && !args.suite && !args.overrides.workloads;

  std::vector<CaseSpec> cases;
  std::string suite_name, out_path;
  std::optional<ResultsFile> file;
  std::vector<char> skip;
  std::string problem;
  try {
    std::vector<MatrixSpec> matrices;
    if (args.config) {
      matrices = parse_matrix_toml(read_text_file(*args.config), *args.config);
    } else if (args.suite || nothing_given) {
      suite_name = args.suite.value_or("quick");
      matrices = parse_matrix_toml(find_suite(suite_name).toml, "suite " + suite_name);
    } else {
      matrices = {MatrixSpec{}};
    }
    for (MatrixSpec& m : matrices) args.overrides.apply(m);
    cases = expand(matrices, mpi.size());
    validate(cases, drivers);
    out_path = args.out.value_or(default_out(args, suite_name));
    skip.assign(cases.size(), 0);
  } catch (const UsageError& e) {
    problem = e.what();
  }
  // Agree on the request before rank 0 touches the results file, so that a problem only another
  // rank sees (an unreadable --config, say) never truncates an existing file.
  if (report_usage_error(mpi.world(), problem)) return 2;
  try {
    if (root) {
      file.emplace(open_results(out_path, args, !args.out.has_value(), mpi.size()));
      if (args.resume) {
        // A case is done when the file holds it with status ok; anything else runs again.
        std::set<std::string> done;
        for (const std::string& name : file->case_names()) {
          const Attrs a = file->read_attrs("cases/" + name);
          if (std::get<std::string>(attr(a, "status")) == "ok") done.insert(std::get<std::string>(attr(a, "case_key")));
        }
        for (size_t i = 0; i < cases.size(); ++i) skip[i] = done.count(cases[i].command()) ? 1 : 0;
      }
    }
  } catch (const UsageError& e) {
    problem = e.what();
  }
  if (report_usage_error(mpi.world(), problem)) return 2;
  DLSCALE_CHECK_MPI(MPI_Bcast(skip.data(), static_cast<int>(skip.size()), MPI_CHAR, 0, mpi.world()));

  Progress progress(root);
  const std::vector<RankInfo> table = gather_rank_table(mpi.world(), mpi.info());
  if (root) {
    for (const std::string& w : provenance_warnings(detect_loaded_math())) progress.warn(w);
    for (const std::string& w : shared_core_warnings(table)) progress.warn(w);
    if (!args.resume) {
      file->write_root({{"schema", std::string(kSchemaVersion)},
                        {"dlscale_version", dlscale_version()},
                        {"git_commit", git_commit()},
                        {"created_utc", utc_now()},
                        {"command_line", args.command_line},
                        {"world_size", int64_t{mpi.size()}},
                        {"config", cases_to_toml(cases)}});
      file->write_system(rank_table(table), software_attributes(drivers), environment_attributes());
    } else {
      file->write_root({{"resumed_utc", utc_now()}, {"resume_command_line", args.command_line}});
    }
    file->flush();
    fmt::print("dlscale: {} case(s) on {} rank(s) -> {}\n", cases.size(), mpi.size(), out_path);
  }

  Runner runner(mpi, drivers, progress);
  int failed = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (skip[i]) {
      if (root) fmt::print("# skipped (already in {}): {}\n", out_path, cases[i].command());
      continue;
    }
    const CaseRecord rec = runner.run(cases[i], static_cast<int>(i), static_cast<int>(cases.size()));
    if (root) {
      const std::string name = file->write_case(rec);
      progress.case_finished(fmt::format("{} {}", name, summary_line(rec)));
      if (std::get<std::string>(attr(rec.attrs, "status")) == "error") failed = 1;
    }
  }
  if (root) fmt::print("dlscale: results in {}\n", out_path);
  return allreduce_max(mpi.world(), failed);
}

}  // namespace dlscale
