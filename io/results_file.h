// The results file (schema dlscale/4, see docs/schema.md): root provenance, the rank table,
// software versions, allow-listed environment, one record per run of dlscale on the file, and
// one group per case. Written by rank 0 only, with the serial HDF5 API.
//
// The file on disk is only ever replaced whole: every change is written into a copy beside it
// (PATH.dlscale-tmp), which is closed, synced and renamed over PATH, so that a reader, a kill
// at any instant or a full disk finds either the previous complete file or the new one, never
// a half-written case. A writer holds an advisory lock (flock on PATH.lock) for as long as it
// exists, so that a second run cannot replace or truncate a file another run is writing.
// docs/schema.md ("How it is written") gives the reasons for this design.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "io/h5.h"

namespace dlscale {

inline constexpr const char* kSchemaVersion = "dlscale/4";
/// The schemas this version reads; it writes (and resumes) kSchemaVersion only.
inline constexpr const char* kReadableSchemas[] = {"dlscale/1", "dlscale/2", "dlscale/3", "dlscale/4"};

using AttrValue = std::variant<std::string, int64_t, double>;
/// Attributes in the order they are written.
using Attrs = std::vector<std::pair<std::string, AttrValue>>;

/// Looks up an attribute; throws std::out_of_range naming it when absent.
const AttrValue& attr(const Attrs& attrs, const std::string& name);

/// A column of a compound table: integers, strings or floats.
struct Column {
  std::string name;
  bool is_string = false;
  std::vector<int64_t> ints;         ///< used when neither is_string nor is_double
  std::vector<std::string> strings;  ///< used when is_string
  std::vector<double> doubles;       ///< used when is_double
  bool is_double = false;
  size_t size() const { return is_string ? strings.size() : is_double ? doubles.size() : ints.size(); }
  static Column of_ints(std::string name, std::vector<int64_t> v) {
    Column c;
    c.name = std::move(name);
    c.ints = std::move(v);
    return c;
  }
  static Column of_strings(std::string name, std::vector<std::string> v) {
    Column c;
    c.name = std::move(name);
    c.is_string = true;
    c.strings = std::move(v);
    return c;
  }
  static Column of_doubles(std::string name, std::vector<double> v) {
    Column c;
    c.name = std::move(name);
    c.is_double = true;
    c.doubles = std::move(v);
    return c;
  }
};

/// A table written as a compound dataset, one record per row (h5py reads it as a structured
/// array). Columns must all have the same length.
struct Table {
  std::vector<Column> columns;
  size_t rows() const { return columns.empty() ? 0 : columns.front().size(); }
  const Column& column(const std::string& name) const;
};

/// One dataset of a GroupRecord: float64 or int64 values of a given shape.
struct DatasetRecord {
  std::string name;
  std::vector<uint64_t> dims;
  std::vector<double> doubles;  ///< used unless is_int
  std::vector<int64_t> ints;    ///< used when is_int
  bool is_int = false;
};

/// A group of attributes, datasets and tables (all-reduce measurements, projections, peaks,
/// utilisation).
struct GroupRecord {
  Attrs attrs;
  std::vector<DatasetRecord> datasets;
  std::vector<std::pair<std::string, Table>> tables;
};

/// Everything measured for one case. A timing case has samples per step (iter_time_s …, summary);
/// an accuracy case (attribute mode "accuracy") has none of those but one group per repeat and
/// the summary over repeats.
struct CaseRecord {
  Attrs attrs;  ///< workload, driver, …, mode, status, message
  int64_t ranks = 0;
  int64_t iterations = 0;                   ///< timed iterations actually recorded
  std::vector<double> iter_time_s;          ///< [ranks][iterations]
  std::vector<double> phase_time_s;         ///< [ranks][iterations][4], empty without --phases
  std::vector<double> exposed_allreduce_s;  ///< [ranks][iterations], empty on one rank
  /// [ranks][iterations] with a sharded optimiser on more than one rank: the parameters'
  /// all-gather after the update, within the update phase; else empty.
  std::vector<double> parameter_gather_s;
  std::vector<double> loss;  ///< [iterations]
  /// [ranks][iterations][buckets] with --bucket-mb on more than one rank (the harness's MPI
  /// buckets): seconds from the step's start to each bucket's reduction starting; else empty.
  std::vector<double> bucket_start_s;
  int64_t buckets = 0;
  /// [buckets] with bucket_start_s: each bucket's size in bytes, in buffer order; empty in files
  /// written before it was recorded.
  std::vector<double> bucket_bytes;
  Table memory;   ///< [ranks]: host_peak_rss_bytes, device_peak_bytes
  Attrs summary;  ///< empty unless the timing case succeeded
  /// Accuracy cases that succeeded: repeats/RR (attributes, and the table "epochs"), in order.
  std::vector<GroupRecord> repeats;
  Attrs accuracy_summary;  ///< accuracy cases that succeeded: means and CIs over the repeats
  /// Whether this is an accuracy case (the attribute mode; files before dlscale/3 have none).
  bool accuracy() const;
};

/// Another process holds the lock of a results file (it is writing it).
class FileBusy : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A change could not be written (disk full, quota, I/O error); the file on disk is the one
/// before the change, complete.
class WriteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The advisory lock of a results file: flock on PATH.lock, which holds the holder's PID and
/// host for the message of a refused second writer. The kernel drops the lock when its holder
/// ends, however it ends (SIGKILL included), so a lock file left behind is never stale.
class FileLock {
 public:
  /// Takes the lock or throws FileBusy naming the holder (H5Error when the lock file cannot
  /// be created or locked at all).
  explicit FileLock(const std::string& target);
  ~FileLock();
  FileLock(FileLock&& o) noexcept : path_(std::move(o.path_)), fd_(o.fd_) { o.fd_ = -1; }
  FileLock& operator=(FileLock&&) = delete;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

class ResultsFile {
 public:
  class Update;

  /// A new results file at `path`, locked; fails if it exists unless `overwrite`. Nothing is
  /// written until the first Update is committed: an existing file stays as it is until then.
  static ResultsFile create(const std::string& path, bool overwrite);
  /// An existing dlscale file; throws H5Error when it is not one, or has a schema this version
  /// cannot read (kReadableSchemas) or, `writable`, another than kSchemaVersion. `writable`:
  /// locked for updates (throws FileBusy when another process writes it).
  static ResultsFile open(const std::string& path, bool writable);

  // Reading: the file as last committed.
  Attrs read_root() const;
  Table read_ranks() const;
  Attrs read_attrs(const std::string& group_path) const;
  /// Names of the case groups ("0000", "0001", …), in order.
  std::vector<std::string> case_names() const;
  CaseRecord read_case(const std::string& name) const;
  /// Names of the child groups of `parent` ("0000", …), in order; empty when it does not exist.
  std::vector<std::string> group_names(const std::string& parent) const;
  /// The table dataset at `path`.
  Table read_table(const std::string& path) const;

  /// Throws H5Error naming the first part that is missing or malformed: the root attributes,
  /// /system/ranks, a case (its attributes, samples, loss, summary), an /allreduce group. A file
  /// dlscale committed is always complete; --resume refuses any other.
  void check_complete() const;

  /// Starts a change: a copy of the file (or, before the first commit of a created file, an
  /// empty file) to write into. Throws WriteError.
  Update update();

  const std::string& path() const { return path_; }
  /// PATH.dlscale-tmp: where changes are written before they replace the file.
  static std::string temp_path(const std::string& path) { return path + ".dlscale-tmp"; }

 private:
  ResultsFile(std::string path, std::optional<FileLock> lock, bool exists)
      : path_(std::move(path)), lock_(std::move(lock)), exists_(exists) {}
  h5::File open_read() const;
  std::string path_;
  std::optional<FileLock> lock_;  ///< held by writers
  bool exists_;                   ///< a committed version exists (false for a created file)
};

/// One change of a results file. The writes go to the copy; commit() replaces the file with it
/// at once. Destroyed without commit, the copy is removed and the file stays as it was.
class ResultsFile::Update {
 public:
  Update(Update&& o) noexcept : owner_(o.owner_), file_(std::move(o.file_)), committed_(o.committed_) {
    o.owner_ = nullptr;
  }
  Update& operator=(Update&&) = delete;
  ~Update();

  void write_root(const Attrs& attrs);
  void write_system(const Table& ranks, const Attrs& software, const Attrs& environment);
  /// Writes /runs/NNNN (the next free number) with `attrs` and, laid out as /system, the rank
  /// table, software and environment of one run of dlscale on the file; returns NNNN.
  std::string append_run(const Attrs& attrs, const Table& ranks, const Attrs& software, const Attrs& environment);
  /// Writes the next case group; returns its name.
  std::string write_case(const CaseRecord& record);
  /// Writes `parent`/NNNN (the next free number); returns NNNN.
  std::string append_group(const std::string& parent, const GroupRecord& group);
  /// Writes a group at `path` (its parent must exist).
  void write_group(const std::string& path, const GroupRecord& group);

  /// Closes the copy, syncs it to the disk and renames it over the file; throws WriteError,
  /// leaving the file as it was.
  void commit();

 private:
  friend class ResultsFile;
  Update(ResultsFile& owner, h5::File file) : owner_(&owner), file_(std::move(file)) {}
  ResultsFile* owner_;
  h5::File file_;
  bool committed_ = false;
};

}  // namespace dlscale
