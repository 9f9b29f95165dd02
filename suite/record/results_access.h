// The results file as the commands see it: opened on rank 0 only after the path has been
// checked (bad paths and existing files are usage errors, never a truncated file), with the
// provenance every file starts with.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "drivers/driver.h"
#include "io/results_file.h"
#include "suite/comm/mpi_context.h"

namespace dlscale {

/// Opens `path` for writing, locked against other writers: creates it (or replaces it with
/// `overwrite`, at the first commit), or reopens a dlscale file of the same world size with
/// `resume`. A `default_path` may create its directory. Throws UsageError naming the problem
/// (another run writing the file among them).
ResultsFile open_results(const std::string& path, bool overwrite, bool resume, bool default_path, int world_size);

/// The case keys of the cases `file` holds with status ok: what --resume skips. Throws
/// UsageError when a case cannot be read.
std::set<std::string> finished_case_keys(const ResultsFile& file);

/// /system/ranks from the gathered rank table.
Table rank_table(const std::vector<RankInfo>& rows);

/// This run's record, /runs/NNNN (command line, configuration, world size, rank table,
/// software, environment), and for a new file the root attributes and /system, which keep
/// describing the run that created it. Returns the run's number, which the run's cases name.
int64_t write_provenance(ResultsFile::Update& file, const std::vector<RankInfo>& table, const Registry& drivers,
                         int world_size, const std::string& command_line, const std::string& config, bool resume);

}  // namespace dlscale
