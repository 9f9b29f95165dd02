// The results file (schema dlscale/2, see docs/schema.md): root provenance, the rank table,
// software versions, allow-listed environment, and one group per case. Written by rank 0
// only, with the serial HDF5 API, and flushed after every case so that a crash later in a
// sweep loses nothing already measured.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "io/h5.h"

namespace dlscale {

inline constexpr const char* kSchemaVersion = "dlscale/2";
/// The schemas this version reads; it writes (and resumes) kSchemaVersion only.
inline constexpr const char* kReadableSchemas[] = {"dlscale/1", "dlscale/2"};

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

/// Everything measured for one case.
struct CaseRecord {
  Attrs attrs;  ///< workload, driver, …, status, message
  int64_t ranks = 0;
  int64_t iterations = 0;                   ///< timed iterations actually recorded
  std::vector<double> iter_time_s;          ///< [ranks][iterations]
  std::vector<double> phase_time_s;         ///< [ranks][iterations][4], empty without --phases
  std::vector<double> exposed_allreduce_s;  ///< [ranks][iterations], empty on one rank
  std::vector<double> loss;                 ///< [iterations]
  Table memory;                             ///< [ranks]: host_peak_rss_bytes, device_peak_bytes
  Attrs summary;                            ///< empty unless the case succeeded
};

class ResultsFile {
 public:
  /// Creates a new file; fails if it exists unless `overwrite`.
  static ResultsFile create(const std::string& path, bool overwrite);
  /// Opens an existing dlscale file; throws when it is not one, or has a schema this version
  /// cannot read (kReadableSchemas) or, `writable`, another than kSchemaVersion.
  static ResultsFile open(const std::string& path, bool writable);

  void write_root(const Attrs& attrs);
  Attrs read_root() const;
  void write_system(const Table& ranks, const Attrs& software, const Attrs& environment);
  Table read_ranks() const;
  Attrs read_attrs(const std::string& group_path) const;

  /// Names of the case groups ("0000", "0001", …), in order.
  std::vector<std::string> case_names() const;
  /// Writes the next case group and flushes the file; returns its name.
  std::string write_case(const CaseRecord& record);
  CaseRecord read_case(const std::string& name) const;

  /// Writes `parent`/NNNN (the next free number) and flushes the file; returns NNNN.
  std::string append_group(const std::string& parent, const GroupRecord& group);
  /// Writes a group at `path` (its parent must exist) and flushes the file.
  void write_group(const std::string& path, const GroupRecord& group);
  /// Names of the child groups of `parent` ("0000", …), in order; empty when it does not exist.
  std::vector<std::string> group_names(const std::string& parent) const;
  /// The table dataset at `path`.
  Table read_table(const std::string& path) const;

  void flush();
  const std::string& path() const { return path_; }

 private:
  ResultsFile(std::string path, h5::File file) : path_(std::move(path)), file_(std::move(file)) {}
  std::string path_;
  h5::File file_;
};

}  // namespace dlscale
