// Runs one case on its ranks through the stages every case goes through: describe (what it is,
// before anything can fail), prepare (suite/case/case_setup.h), measure and record (its run
// mode, suite/case/run_mode.h), finish; the typed result is complete on world rank 0.
#pragma once

#include <string>

#include "suite/case/case_result.h"
#include "suite/case/case_setup.h"
#include "suite/case/progress.h"
#include "suite/case/resolved_case.h"
#include "suite/comm/mpi_context.h"
#include "suite/meters/peak.h"

namespace dlscale {

class Runner {
 public:
  /// `stop_hint`: what to tell the user when a case hangs past its --case-timeout and the
  /// process must end (where the finished cases are, and how to run the rest). `peaks`: what
  /// rank 0 compares each case's achieved FLOP/s with.
  Runner(const MpiContext& mpi, Progress& progress, std::string stop_hint = "",
         PeakLookup peaks = PeakLookup({}, "", "no peak was given to this run"))
      : mpi_(mpi), progress_(progress), stop_hint_(std::move(stop_hint)), peaks_(std::move(peaks)) {}

  /// Runs `c` on its ranks (c.placed; world rank 0 is always among them and gets the result);
  /// the job's other ranks wait. A failure on any rank (unsupported, out of memory, a timeout,
  /// an error) is agreed on by the case's ranks and recorded; the sweep goes on. Collective over
  /// the world.
  CaseResult run(const ResolvedCase& c, int index, int total);

 private:
  /// The stages of one case on the ranks of `comm`; every rank calls the same collectives in the
  /// same order whatever its own status.
  CaseResult run_on(const ResolvedCase& c, MPI_Comm comm, int index, int total);

  const MpiContext& mpi_;
  Progress& progress_;
  std::string stop_hint_;
  PeakLookup peaks_;
  DatasetCache datasets_;                // read once per sweep
  bool test_reduction_skipped_ = false;  // fault_injection::skip_reduction_rank's one skip was taken
};

}  // namespace dlscale
