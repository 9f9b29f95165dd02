// Opening the results file (checked before any benchmark work) and writing its provenance;
// shared by `dlscale run` and `dlscale allreduce`.
#include "suite/record/results_access.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "schema/case_record.h"
#include "schema/fields.h"
#include "schema/run_record.h"
#include "suite/errors.h"
#include "suite/meters/wall_clock.h"
#include "suite/process/read_guard.h"
#include "suite/record/provenance.h"

namespace dlscale {

namespace {

std::string parent_dir(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

bool is_dir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

const char* file_kind(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a plain file";
}

}  // namespace

ResultsFile open_results(const std::string& path, bool overwrite, bool resume, bool default_path, int world_size) {
  if (overwrite && resume) throw UsageError("--overwrite and --resume exclude each other");
  const std::string dir = parent_dir(path);
  if (default_path && !is_dir(dir) && ::mkdir(dir.c_str(), 0777) != 0) {
    throw UsageError(fmt::format("cannot create directory {} for the results: {}", dir, std::strerror(errno)));
  }
  if (!is_dir(dir)) throw UsageError(fmt::format("--out {}: directory {} does not exist", path, dir));
  if (::access(dir.c_str(), W_OK) != 0)
    throw UsageError(fmt::format("--out {}: directory {} is not writable", path, dir));
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;  // through a symbolic link
  if (exists && is_dir(path)) throw UsageError(fmt::format("--out {}: is a directory", path));
  // --overwrite replaces the name by renaming a finished copy over it: a FIFO, a device or a
  // socket there is something else's, never a results file.
  if (exists && !S_ISREG(st.st_mode)) {
    throw UsageError(fmt::format("--out {}: not a regular file ({})", path, file_kind(st.st_mode)));
  }
  if (exists && ::access(path.c_str(), W_OK) != 0)
    throw UsageError(fmt::format("--out {}: file is not writable", path));
  try {
    if (resume) {
      if (!exists) throw UsageError(fmt::format("--resume: {} does not exist", path));
      // A damaged file can stop HDF5 inside one call for ever: the guard then ends the job,
      // naming the file, as bad input.
      const ReadGuard reading(fmt::format("dlscale: error: --resume: {}", path), read_stall_seconds());
      ResultsFile f = ResultsFile::open(path, true);
      f.check_complete();
      RootRecord root;
      read_fields(f.read_root(), kRootFields, root);
      const int64_t old_size = root.world_size;
      if (old_size != world_size) {
        throw UsageError(
            fmt::format("--resume: {} was written by {} ranks, this job has {}", path, old_size, world_size));
      }
      return f;
    }
    if (exists && !overwrite) {
      throw UsageError(
          fmt::format("{} already exists: pass --overwrite to replace it or --resume to add missing cases", path));
    }
    return ResultsFile::create(path, overwrite);
  } catch (const FileBusy& e) {
    throw UsageError(e.what());
  } catch (const h5::H5Error& e) {
    // Name the file once: most of the reader's messages begin with it, a failed HDF5 call's not.
    const std::string what = e.what();
    const std::string flag = resume ? "--resume" : "--out";
    throw UsageError(what.rfind(path + ":", 0) == 0 ? fmt::format("{}: {}", flag, what)
                                                    : fmt::format("{} {}: {}", flag, path, what));
  }
}

std::set<std::string> finished_case_keys(const ResultsFile& file) {
  std::set<std::string> done;
  try {
    for (const std::string& name : file.case_names()) {
      const Attrs a = file.read_attrs("cases/" + name);
      CaseDescription description;
      CaseOutcome outcome;
      read_fields(a, kCaseDescriptionFields, description);
      read_fields(a, kCaseOutcomeFields, outcome);
      if (outcome.status.empty() || description.case_key.empty()) {
        throw std::invalid_argument(fmt::format("case {} has no status or no case key", name));
      }
      if (outcome.status == "ok") done.insert(description.case_key);
    }
  } catch (const std::exception& e) {  // H5Error, a missing attribute, one of another type
    throw UsageError(fmt::format("--resume: {}: not a complete dlscale file ({})", file.path(), e.what()));
  }
  return done;
}

namespace {

/// /system/ranks and /runs/NNNN/ranks: one row per world rank.
const ColumnField<RankInfo> kRankColumns[] = {
    {"rank", [](const RankInfo& r, size_t) -> AttrValue { return int64_t{r.rank}; }},
    {"host", [](const RankInfo& r, size_t) -> AttrValue { return r.host; }},
    {"local_rank", [](const RankInfo& r, size_t) -> AttrValue { return int64_t{r.local_rank}; }},
    {"cpu_affinity", [](const RankInfo& r, size_t) -> AttrValue { return r.cpu_affinity; }},
    {"numa_node", [](const RankInfo& r, size_t) -> AttrValue { return int64_t{r.numa_node}; }},
    {"device", [](const RankInfo& r, size_t) -> AttrValue { return r.device; }},
    {"threads", [](const RankInfo& r, size_t) -> AttrValue { return int64_t{r.threads}; }},
    {"network", [](const RankInfo& r, size_t) -> AttrValue { return r.network; }},
    {"blas", [](const RankInfo& r, size_t) -> AttrValue { return r.blas; }},
};

}  // namespace

Table rank_table(const std::vector<RankInfo>& rows) { return table_of(rows, kRankColumns); }

int64_t write_provenance(ResultsFile::Update& file, const std::vector<RankInfo>& table, const Registry& drivers,
                         int world_size, const std::string& command_line, const std::string& config, bool resume) {
  const Table ranks = rank_table(table);
  const Attrs software = software_attributes(drivers), environment = environment_attributes();
  const std::string started = utc_now();
  if (!resume) {
    const RootRecord root{kSchemaVersion, dlscale_version(), git_commit(), started, command_line, world_size, config};
    file.write_root(attrs_of(root, kRootFields));
    file.write_system(ranks, software, environment);
  }
  // A resume may run another matrix, on other hosts or another build: its cases are then
  // described by this record, never by the root's.
  const RunRecord record{started, resume, command_line, config, world_size, dlscale_version(), git_commit()};
  const std::string run = file.append_run(attrs_of(record, kRunFields), ranks, software, environment);
  return std::stoll(run);
}

}  // namespace dlscale
