// The measured peaks in a results file: /peak/NNNN (docs/schema.md), its `rates` table declared
// once as a field table, written by `dlscale peak` and `dlscale run --peak measure`, read back by
// `--peak FILE`.
#pragma once

#include <string>
#include <vector>

#include "io/results_file.h"
#include "suite/meters/peak.h"

namespace dlscale {

/// The rows as /peak/NNNN/rates and back.
Table peak_table(const std::vector<PeakRow>& rows);
std::vector<PeakRow> peak_rows(const Table& table);

/// /peak/NNNN: the rows (table `rates`) with how they were obtained, and the /runs record `run`.
GroupRecord peak_group(const std::vector<PeakRow>& rows, const std::string& source, double seconds, int64_t run);

/// The rows of the last /peak group of the results file at `path`, and that group's name in
/// `where`; throws UsageError naming the problem (no such file, no /peak in it).
std::vector<PeakRow> read_peak_file(const std::string& path, std::string* where);

}  // namespace dlscale
