// What every subcommand that measures and records does around its measurement, on every rank
// and agreed by all: refuse bad input with one line before anything runs, let rank 0 open (and
// lock) the results file, and commit what was measured in one update that every rank learns the
// outcome of. `run`, `allreduce` and `peak` are built from these.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "drivers/driver.h"
#include "io/results_file.h"
#include "suite/comm/mpi_context.h"
#include "suite/process/stop_signals.h"

namespace dlscale {

/// `text` with its control characters written out (\n, \r, \t, \xHH): a message that quotes
/// what a user typed stays one line whatever was typed.
std::string one_line(const std::string& text);

/// Prints `message` as one "dlscale: error: …" line (one_line) from the first rank that has one and returns
/// true on every rank when any rank has one. Collective over `comm`.
bool report_usage_error(MPI_Comm comm, const std::string& message);

/// `check()` on every rank; a UsageError it throws on any rank is reported as by
/// report_usage_error, and every rank returns true. Collective over `comm`.
bool usage_refused(MPI_Comm comm, const std::function<void()>& check);

/// Agrees on rank 0's attempt to update the results file (`error`: why it failed, or empty; on
/// the other ranks always empty). On a failure rank 0 prints one line naming it, that the file
/// is as it was and the command that continues (`resume_hint`), and every rank returns true (the
/// command then exits with code 5). Collective over `comm`.
bool write_failed(MPI_Comm comm, const std::string& error, const std::string& path, const std::string& resume_hint);

/// `write()` on rank 0 (one update of the results file at `path`), its outcome agreed by every
/// rank as by write_failed; true on every rank when it was written. Collective over `comm`.
bool written_by_rank0(MPI_Comm comm, const std::string& path, const std::string& resume_hint,
                      const std::function<void()>& write);

/// What a measuring subcommand records: its command line and whether it adds to the file.
struct Recording {
  std::string out_path, command_line;
  bool resume = false;
};

/// One commit, on rank 0 under `deadline`'s hold-off, of this run's provenance (its record in
/// /runs and, for a new file, /system: `table`, `drivers`) and of what `add(update, run)` appends,
/// `run` being the number of that record. Until the commit the file is as it was, and the same
/// command runs again. Collective over `mpi`'s world; false on every rank when it was not
/// written (rank 0 has said why).
bool commit_measurement(const MpiContext& mpi, ResultsFile* file, StopDeadline& deadline,
                        const std::vector<RankInfo>& table, const Registry& drivers, const Recording& recording,
                        const std::function<void(ResultsFile::Update&, int64_t run)>& add);

}  // namespace dlscale
